// Extended attributes: the inode's inline area (36 bytes), and beyond it one external block
// (BXTR) per inode, journaled like every metadata block, counted in the inode's blocks, never
// shared. Names carry their namespace ("user.x") and are at most 255 bytes (ERANGE past that);
// a set that no placement of inline area and block holds gets ENOSPC. The byte formats and the
// placement are in xattr_block.cc. Kernel twins (fs/ext4/xattr.c): ext4_xattr_get,
// ext4_listxattr, ext4_xattr_set_handle (with ext4_xattr_ibody_set and ext4_xattr_block_set),
// ext4_xattr_release_block (when the last block attribute leaves, and at inode free).
#include "xattr.h"

#include <sys/xattr.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

#include "attr_flags.h"
#include "inode_table.h"
#include "acl.h"
#include "xattr_block.h"

namespace biofs {

using namespace disk;
using xattr::Attr;

int Xattr::xattr_load(InodeObj* in, std::vector<Attr>* all) {
  if (!xattr::parse_inline(in->d, all)) return -EUCLEAN;  // a damaged inode: never read past the area
  const uint64_t blk = xattr::block_of(in->d);
  if (!blk) return 0;
  // An address outside the data area, or a flag the superblock does not allow: damage.
  if (!(s_.sb.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK) || blk < s_.sb.data_start ||
      blk >= s_.sb.block_count - 1)
    return -EUCLEAN;
  Buffer* b;
  if (int err = s_.cache.get(blk, BLK_XATTR, &b)) return err;  // magic, block number, crc
  if (b->magic != BLK_XATTR) return -EUCLEAN;                // already cached as another kind of block
  xattr::ParsedBlock p = xattr::parse_block(b->data.data(), s_.bs, blk, in->ino, false);
  if (p.state != xattr::BlockState::ok) return -EUCLEAN;
  all->insert(all->end(), p.attrs.begin(), p.attrs.end());
  return 0;
}

int Xattr::xattr_store(InodeObj* in, const std::vector<Attr>& all) {
  std::vector<Attr> inl, out;
  if (!xattr::place(all, s_.bs, &inl, &out)) return -ENOSPC;
  Inode& d = in->d;
  const uint64_t old = xattr::block_of(d);
  uint64_t blk = old;
  if (!out.empty() && !old) {
    uint64_t got;
    if (int err = s_.alloc.alloc_blocks(0, 1, &blk, &got)) return err;
    if (!(s_.sb.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK)) {  // an older image: first use
      s_.sb.feature_incompat |= FEATURE_INCOMPAT_XATTR_BLOCK;
      if (int err = itable_.save_superblock_journaled()) {
        s_.alloc.free_blocks_later(blk, 1);
        return err;
      }
    }
    d.blocks++;
  } else if (out.empty() && old) {
    s_.alloc.free_blocks_later(old, 1);  // reusable after the next commit; dropped from the cache
    d.blocks--;
    blk = 0;
  }
  if (blk) {
    Buffer* b = s_.cache.get_new(blk, BLK_XATTR);  // the whole block rewritten, dirty
    xattr::pack_block(b->data.data(), s_.bs, blk, in->ino, out);
  }
  xattr::set_block(d, blk);
  xattr::pack_inline(d, inl);
  InodeTable::touch(d, false, false, true);
  return itable_.isave(in);
}

void Xattr::xattr_release_block(InodeObj* in) {
  const uint64_t blk = xattr::block_of(in->d);
  if (!blk) return;
  // Only a block that reads back as this inode's is freed: a damaged address must not free
  // metadata or another inode's block (a block left marked in use is fsck's to find).
  Buffer* b;
  if (blk >= s_.sb.data_start && blk < s_.sb.block_count - 1 && s_.cache.get(blk, BLK_XATTR, &b) == 0 &&
      b->magic == BLK_XATTR && reinterpret_cast<const XattrBlock*>(b->data.data())->owner == in->ino)
    s_.alloc.free_blocks_later(blk, 1);
  in->d.blocks--;
  xattr::set_block(in->d, 0);
}

namespace {

// The namespaces ext4 knows; anything else is EOPNOTSUPP, as ext4 answers (and as cp -a and
// tar expect from a filesystem that does not keep such an attribute).
bool known_namespace(const std::string& name) {
  for (const char* p : {"user.", "trusted.", "security."})
    if (name.rfind(p, 0) == 0 && name.size() > std::strlen(p)) return true;
  return name == ACL_ACCESS_XATTR || name == ACL_DEFAULT_XATTR;
}

constexpr const char* kCapsXattr = "security.capability";

std::vector<Attr>::iterator find_attr(std::vector<Attr>& attrs, const std::string& name) {
  return std::find_if(attrs.begin(), attrs.end(), [&](const Attr& a) { return a.name == name; });
}

}  // namespace

int Xattr::acl_inherit(InodeObj* dir, mode_t* mode, mode_t umask, std::vector<Attr>* attrs) {
  std::vector<Attr> dir_attrs;
  if (int err = xattr_load(dir, &dir_attrs)) return err;
  auto it = find_attr(dir_attrs, ACL_DEFAULT_XATTR);
  const std::optional<Acl> dflt = it == dir_attrs.end() ? std::nullopt : acl_from_xattr(it->value);
  if (!dflt) {
    *mode &= ~(umask & 0777);
    return 0;
  }
  Acl access;
  *mode = acl_create(*dflt, *mode, &access);
  if (!access.empty()) attrs->push_back({ACL_ACCESS_XATTR, acl_to_xattr(access)});
  if (S_ISDIR(*mode)) attrs->push_back({ACL_DEFAULT_XATTR, it->value});
  return 0;
}

int Xattr::acl_chmod_locked(InodeObj* in) {
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  auto it = find_attr(attrs, ACL_ACCESS_XATTR);
  if (it == attrs.end()) return 0;
  std::optional<Acl> acl = acl_from_xattr(it->value);
  if (!acl) return -EUCLEAN;
  acl_chmod(&*acl, in->d.mode);
  it->value = acl_to_xattr(*acl);
  return xattr_store(in, attrs);
}

int Xattr::acl_set_access(InodeObj* in, std::vector<Attr>* attrs, const std::string& value) {
  const std::optional<Acl> acl = acl_from_xattr(value);
  if (!acl) return -EINVAL;
  mode_t bits;
  const bool equiv = acl_equiv_mode(*acl, &bits);
  in->d.mode = (in->d.mode & ~mode_t(0777)) | bits;
  auto it = find_attr(*attrs, ACL_ACCESS_XATTR);
  if (equiv) {
    if (it != attrs->end()) attrs->erase(it);  // the mode says it all (posix_acl_update_mode)
  } else if (it != attrs->end()) {
    it->value = value;
  } else {
    attrs->push_back({ACL_ACCESS_XATTR, value});
  }
  return xattr_store(in, *attrs);
}

int Xattr::kill_caps(InodeObj* in) {
  if (in->has_caps == 0) return 0;
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  auto it = find_attr(attrs, kCapsXattr);
  if (it != attrs.end()) {
    attrs.erase(it);
    if (int err = xattr_store(in, attrs)) return err;
  }
  in->has_caps = 0;
  return 0;
}

int Xattr::setxattr(uint64_t ino, const std::string& name, const std::string& value, int flags) {
  std::unique_lock ex(s_.lock);
  if (name.empty() || name.size() > xattr::NAME_MAX_LEN) return name.empty() ? -EINVAL : -ERANGE;
  if (!known_namespace(name)) return -EOPNOTSUPP;
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (int err = may_change_xattrs(in)) return err;
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  auto it = find_attr(attrs, name);
  if (it != attrs.end() && (flags & XATTR_CREATE)) return -EEXIST;
  if (it == attrs.end() && (flags & XATTR_REPLACE)) return -ENODATA;
  if (name == ACL_ACCESS_XATTR) {
    if (flags & XATTR_ACL_KILL_SGID) in->d.mode &= ~mode_t(S_ISGID);
    return acl_set_access(in, &attrs, value);
  }
  if (name == ACL_DEFAULT_XATTR) {
    if (!S_ISDIR(in->d.mode)) return -EACCES;
    if (!acl_from_xattr(value)) return -EINVAL;
  }
  if (name == kCapsXattr) in->has_caps = 1;
  if (it != attrs.end()) it->value = value;
  else attrs.push_back({name, value});
  return xattr_store(in, attrs);
}

int Xattr::getxattr(uint64_t ino, const std::string& name, std::string* value) {
  if (!known_namespace(name)) return -EOPNOTSUPP;
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  for (const Attr& a : attrs)
    if (a.name == name) {
      *value = a.value;
      return 0;
    }
  return -ENODATA;
}

int Xattr::listxattr(uint64_t ino, std::string* names) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  names->clear();
  for (const Attr& a : attrs) names->append(a.name).push_back('\0');
  return 0;
}

int Xattr::removexattr(uint64_t ino, const std::string& name) {
  if (!known_namespace(name)) return -EOPNOTSUPP;
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (int err = may_change_xattrs(in)) return err;
  std::vector<Attr> attrs;
  if (int err = xattr_load(in, &attrs)) return err;
  auto it = std::find_if(attrs.begin(), attrs.end(), [&](const Attr& a) { return a.name == name; });
  if (it == attrs.end()) return -ENODATA;
  attrs.erase(it);
  return xattr_store(in, attrs);  // fewer bytes always fit; the block goes with its last entry
}

}  // namespace biofs
