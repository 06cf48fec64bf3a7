// The ACL arithmetic of fs/acl.h against what setfacl/getfacl and the kernel's fs/posix_acl.c do.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include "fs/acl.h"

using namespace biofs;

namespace {
Acl minimal(uint16_t u, uint16_t g, uint16_t o) {
  return {{ACL_TAG_USER_OBJ, u, 0}, {ACL_TAG_GROUP_OBJ, g, 0}, {ACL_TAG_OTHER, o, 0}};
}
Acl with_user(uint32_t uid, uint16_t perm, uint16_t mask) {
  Acl a = minimal(7, 5, 4);
  a.insert(a.begin() + 1, AclEntry{ACL_TAG_USER, perm, uid});
  a.insert(a.end() - 1, AclEntry{ACL_TAG_MASK, mask, 0});
  return a;
}
}  // namespace

TEST_CASE("acl: the xattr form round-trips, malformed values are refused") {
  const Acl a = with_user(1000, 6, 7);
  const std::string v = acl_to_xattr(a);
  CHECK(v.size() == 4 + 8 * 5);
  const auto back = acl_from_xattr(v);
  REQUIRE(back);
  REQUIRE(back->size() == 5);
  CHECK((*back)[1].id == 1000);
  CHECK(!acl_from_xattr(""));
  CHECK(!acl_from_xattr(v.substr(0, v.size() - 1)));  // a torn entry
  std::string bad_version = v;
  bad_version[0] = 1;
  CHECK(!acl_from_xattr(bad_version));
  Acl no_mask = with_user(1, 7, 7);
  no_mask.erase(no_mask.end() - 2);  // a named entry needs a mask
  CHECK(!acl_from_xattr(acl_to_xattr(no_mask)));
  Acl two_owners = minimal(7, 5, 5);
  two_owners.push_back({ACL_TAG_USER_OBJ, 7, 0});
  CHECK(!acl_from_xattr(acl_to_xattr(two_owners)));
  Acl big_perm = minimal(7, 5, 5);
  big_perm[0].perm = 8;
  CHECK(!acl_from_xattr(acl_to_xattr(big_perm)));
}

TEST_CASE("acl: equivalence to mode bits, the group bits are the mask's, chmod rewrites the mask") {
  mode_t m;
  CHECK(acl_equiv_mode(minimal(6, 4, 0), &m));
  CHECK(m == 0640);
  const Acl a = with_user(1000, 6, 5);
  CHECK_FALSE(acl_equiv_mode(a, &m));
  CHECK(m == 0754);  // group bits from the mask (5), not the group entry
  Acl c = a;
  acl_chmod(&c, 0710);
  CHECK(acl_mode_bits(c) == 0710);
  CHECK(c[1].perm == 6);  // the named user's entry is kept; the mask limits it
  CHECK(c[2].perm == 5);  // the owning group's entry too (the mask stands for it)
}

TEST_CASE("acl: a new file under a default ACL: mode and access ACL as posix_acl_create gives them") {
  Acl access;
  // Default ACL u::rwx,u:1000:rw-,g::r-x,m::rwx,o::r-x; create(0666): the mode is ANDed with it.
  const mode_t m = acl_create(with_user(1000, 6, 7), S_IFREG | 0666, &access);
  CHECK(m == (S_IFREG | 0664));
  REQUIRE(access.size() == 5);
  CHECK(acl_mode_bits(access) == 0664);
  // A default ACL with only mode-bit entries leaves no access ACL.
  const mode_t m2 = acl_create(minimal(7, 5, 0), S_IFDIR | 0777, &access);
  CHECK(m2 == (S_IFDIR | 0750));
  CHECK(access.empty());
}
