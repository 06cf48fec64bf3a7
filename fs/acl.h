// POSIX ACLs in their xattr form (system.posix_acl_access / system.posix_acl_default), as the
// kernel's fs/posix_acl.c treats them: the value is a little-endian header (version 2) and
// entries {u16 tag, u16 perm, u32 id}. With FUSE_CAP_POSIX_ACL the kernel enforces ACLs and
// caches them; the filesystem keeps the mode in step with the access ACL (posix_acl_update_mode,
// posix_acl_chmod) and gives new files the default ACL of their directory (posix_acl_create).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace biofs {

inline constexpr const char* ACL_ACCESS_XATTR = "system.posix_acl_access";
inline constexpr const char* ACL_DEFAULT_XATTR = "system.posix_acl_default";

// ACL_USER_OBJ and friends (include/uapi/linux/posix_acl.h).
enum : uint16_t { ACL_TAG_USER_OBJ = 0x01, ACL_TAG_USER = 0x02, ACL_TAG_GROUP_OBJ = 0x04, ACL_TAG_GROUP = 0x08,
                  ACL_TAG_MASK = 0x10, ACL_TAG_OTHER = 0x20 };

struct AclEntry {
  uint16_t tag;
  uint16_t perm;  // rwx as 4/2/1
  uint32_t id;    // ACL_USER / ACL_GROUP: the uid or gid
};

using Acl = std::vector<AclEntry>;

// Parses and checks an xattr value as posix_acl_valid() does (one USER_OBJ, GROUP_OBJ and OTHER,
// a MASK when named entries exist, perms within rwx). nullopt when malformed.
std::optional<Acl> acl_from_xattr(const std::string& value);
std::string acl_to_xattr(const Acl& acl);

// posix_acl_equiv_mode(): whether the ACL says no more than mode bits do; *mode gets its bits.
bool acl_equiv_mode(const Acl& acl, mode_t* mode);
// The permission bits an access ACL gives the mode (owner, mask or group, other).
mode_t acl_mode_bits(const Acl& acl);
// posix_acl_chmod(): the ACL after a chmod to `mode`.
void acl_chmod(Acl* acl, mode_t mode);
// posix_acl_create(): a new inode's mode under its directory's default ACL `dflt`; *access gets
// the new inode's access ACL (empty when the mode says it all).
mode_t acl_create(const Acl& dflt, mode_t mode, Acl* access);

}  // namespace biofs
