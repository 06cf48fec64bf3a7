// An inode's extended attributes (fs/ext4/xattr.c): inline in the inode, then in one external
// block; POSIX ACLs kept in step with the mode (fs/posix_acl.c); security.capability dropped
// with a write, a truncation or a change of owner.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fs_info.h"
#include "inode_table.h"

namespace biofs {

namespace xattr {
struct Attr;  // xattr_block.h
}

// A setxattr flag beside XATTR_CREATE and XATTR_REPLACE: setting the access ACL also clears the
// set-group-ID bit, because the caller is neither in the file's group nor privileged
// (posix_acl_update_mode(), fs/posix_acl.c, v6.18; FUSE's FUSE_SETXATTR_ACL_KILL_SGID).
inline constexpr int XATTR_ACL_KILL_SGID = 1 << 8;

class Xattr {
 public:
  Xattr(FsInfo& s, InodeTable& itable) : s_(s), itable_(itable) {}

  // Names up to 255 bytes (-ERANGE past that); -ENOSPC when inline area and block cannot hold
  // the set.
  int setxattr(uint64_t ino, const std::string& name, const std::string& value, int flags);
  int getxattr(uint64_t ino, const std::string& name, std::string* value);
  int listxattr(uint64_t ino, std::string* names);  // NUL-terminated names, concatenated
  int removexattr(uint64_t ino, const std::string& name);

  // Every attribute of an inode (inline ones first; -EUCLEAN for a damaged area or block);
  // storing a set (placed inline and in the block, which is allocated or freed as needed;
  // -ENOSPC when it does not fit); the block freed with its inode.
  int xattr_load(InodeObj* in, std::vector<xattr::Attr>* all);
  int xattr_store(InodeObj* in, const std::vector<xattr::Attr>& all);
  void xattr_release_block(InodeObj* in);
  // POSIX ACLs (acl.h) kept in step with the mode: a new inode's mode and ACLs from its
  // directory's default ACL (the umask when there is none); a chmod rewrites the access ACL.
  int acl_inherit(InodeObj* dir, mode_t* mode, mode_t umask, std::vector<xattr::Attr>* attrs);
  int acl_chmod_locked(InodeObj* in);
  // An access ACL set: the mode takes its bits; one the mode says whole is not stored.
  int acl_set_access(InodeObj* in, std::vector<xattr::Attr>* attrs, const std::string& value);
  // security.capability goes with a write, a truncation or a change of owner
  // (cap_inode_killpriv), whoever makes it.
  int kill_caps(InodeObj* in);

 private:
  FsInfo& s_;
  InodeTable& itable_;
};

}  // namespace biofs
