// The kernel twin: fs/posix_acl.c (posix_acl_valid, posix_acl_equiv_mode, __posix_acl_chmod,
// __posix_acl_create) and fs/posix_acl.c's xattr conversion (posix_acl_from_xattr).
#include "acl.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

namespace biofs {

namespace {
constexpr uint32_t kAclVersion = 2;

AclEntry* find(Acl* acl, uint16_t tag) {
  for (AclEntry& e : *acl)
    if (e.tag == tag) return &e;
  return nullptr;
}
const AclEntry* find(const Acl& acl, uint16_t tag) { return find(const_cast<Acl*>(&acl), tag); }
}  // namespace

std::optional<Acl> acl_from_xattr(const std::string& v) {
  if (v.size() < 4 || (v.size() - 4) % 8) return std::nullopt;
  uint32_t version;
  std::memcpy(&version, v.data(), 4);
  if (version != kAclVersion) return std::nullopt;
  Acl acl;
  unsigned user_obj = 0, group_obj = 0, other = 0, mask = 0, named = 0;
  for (size_t p = 4; p < v.size(); p += 8) {
    AclEntry e;
    std::memcpy(&e.tag, v.data() + p, 2);
    std::memcpy(&e.perm, v.data() + p + 2, 2);
    std::memcpy(&e.id, v.data() + p + 4, 4);
    if (e.perm & ~7u) return std::nullopt;
    switch (e.tag) {
      case ACL_TAG_USER_OBJ: user_obj++; break;
      case ACL_TAG_GROUP_OBJ: group_obj++; break;
      case ACL_TAG_OTHER: other++; break;
      case ACL_TAG_MASK: mask++; break;
      case ACL_TAG_USER:
      case ACL_TAG_GROUP: named++; break;
      default: return std::nullopt;
    }
    acl.push_back(e);
  }
  if (user_obj != 1 || group_obj != 1 || other != 1 || mask > 1 || (named && !mask)) return std::nullopt;
  return acl;
}

std::string acl_to_xattr(const Acl& acl) {
  std::string v(4 + 8 * acl.size(), '\0');
  std::memcpy(v.data(), &kAclVersion, 4);
  for (size_t i = 0; i < acl.size(); i++) {
    std::memcpy(v.data() + 4 + 8 * i, &acl[i].tag, 2);
    std::memcpy(v.data() + 6 + 8 * i, &acl[i].perm, 2);
    std::memcpy(v.data() + 8 + 8 * i, &acl[i].id, 4);
  }
  return v;
}

mode_t acl_mode_bits(const Acl& acl) {
  const AclEntry* mask = find(acl, ACL_TAG_MASK);
  const AclEntry* group = mask ? mask : find(acl, ACL_TAG_GROUP_OBJ);
  return mode_t(find(acl, ACL_TAG_USER_OBJ)->perm << 6 | group->perm << 3 | find(acl, ACL_TAG_OTHER)->perm);
}

bool acl_equiv_mode(const Acl& acl, mode_t* mode) {
  *mode = acl_mode_bits(acl);
  return std::none_of(acl.begin(), acl.end(), [](const AclEntry& e) {
    return e.tag == ACL_TAG_USER || e.tag == ACL_TAG_GROUP || e.tag == ACL_TAG_MASK;
  });
}

void acl_chmod(Acl* acl, mode_t mode) {
  find(acl, ACL_TAG_USER_OBJ)->perm = uint16_t((mode >> 6) & 7);
  AclEntry* mask = find(acl, ACL_TAG_MASK);
  (mask ? mask : find(acl, ACL_TAG_GROUP_OBJ))->perm = uint16_t((mode >> 3) & 7);
  find(acl, ACL_TAG_OTHER)->perm = uint16_t(mode & 7);
}

mode_t acl_create(const Acl& dflt, mode_t mode, Acl* access) {
  // posix_acl_create_masq(): the entries that stand for mode bits are ANDed with the mode, and
  // the mode with them.
  Acl acl = dflt;
  AclEntry* mask = find(&acl, ACL_TAG_MASK);
  for (AclEntry& e : acl) {
    unsigned shift;
    if (e.tag == ACL_TAG_USER_OBJ) shift = 6;
    else if (e.tag == ACL_TAG_OTHER) shift = 0;
    else if (e.tag == (mask ? ACL_TAG_MASK : ACL_TAG_GROUP_OBJ)) shift = 3;
    else continue;
    e.perm &= uint16_t((mode >> shift) & 7);
  }
  const mode_t bits = acl_mode_bits(acl);
  mode = (mode & ~mode_t(0777)) | bits;
  mode_t ignored;
  if (acl_equiv_mode(acl, &ignored)) access->clear();
  else *access = std::move(acl);
  return mode;
}

}  // namespace biofs
