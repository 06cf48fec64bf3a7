#include "null_tree.h"

#include <linux/fs.h>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "daemon/fuse_compat.h"  // FUSE_SET_ATTR_*

namespace biofs {

namespace {
timespec now() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}
}  // namespace

NullTree::NullTree(uid_t uid, gid_t gid) {
  Node& root = nodes_[kRoot];
  root.st.st_ino = kRoot;
  root.st.st_mode = S_IFDIR | 0755;
  root.st.st_nlink = 2;
  root.st.st_uid = uid;
  root.st.st_gid = gid;
  root.st.st_blksize = 4096;
  root.st.st_atim = root.st.st_mtim = root.st.st_ctim = now();
  root.parent = kRoot;
  root.lookups = 1;  // the kernel's root is never forgotten
}

NullTree::Node* NullTree::find(uint64_t ino) {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : &it->second;
}

void NullTree::touch(Node& n, bool data) {
  const timespec t = now();
  n.st.st_ctim = t;
  if (data) n.st.st_mtim = t;
}

int NullTree::lookup(uint64_t parent, const std::string& name, struct stat* st) {
  std::lock_guard lock(mu_);
  Node* dir = find(parent);
  if (!dir) return ENOENT;
  if (!S_ISDIR(dir->st.st_mode)) return ENOTDIR;
  auto it = dir->names.find(name);
  if (it == dir->names.end()) return ENOENT;
  Node& n = nodes_.at(it->second.first);
  n.lookups++;
  *st = n.st;
  return 0;
}

void NullTree::remember(uint64_t ino) {
  std::lock_guard lock(mu_);
  if (Node* n = find(ino)) n->lookups++;
}

void NullTree::forget(uint64_t ino, uint64_t count) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n || ino == kRoot) return;
  n->lookups -= std::min(n->lookups, count);
  maybe_free(ino);
}

void NullTree::maybe_free(uint64_t ino) {
  const Node& n = nodes_.at(ino);
  if (n.lookups == 0 && n.st.st_nlink == 0) nodes_.erase(ino);
}

int NullTree::getattr(uint64_t ino, struct stat* st) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n) return ENOENT;
  *st = n->st;
  return 0;
}

int NullTree::setattr(uint64_t ino, const struct stat& want, int to_set, struct stat* st) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n) return ENOENT;
  if (to_set & FUSE_SET_ATTR_MODE) n->st.st_mode = (n->st.st_mode & S_IFMT) | (want.st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) n->st.st_uid = want.st_uid;
  if (to_set & FUSE_SET_ATTR_GID) n->st.st_gid = want.st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (!S_ISREG(n->st.st_mode)) return S_ISDIR(n->st.st_mode) ? EISDIR : EINVAL;
    n->st.st_size = want.st_size;
    touch(*n, true);
  }
  const timespec t = now();
  if (to_set & FUSE_SET_ATTR_ATIME) n->st.st_atim = want.st_atim;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) n->st.st_atim = t;
  if (to_set & FUSE_SET_ATTR_MTIME) n->st.st_mtim = want.st_mtim;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) n->st.st_mtim = t;
  n->st.st_ctim = (to_set & FUSE_SET_ATTR_CTIME) ? want.st_ctim : t;
  *st = n->st;
  return 0;
}

int NullTree::readlink(uint64_t ino, std::string* target) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n) return ENOENT;
  if (!S_ISLNK(n->st.st_mode)) return EINVAL;
  *target = n->target;
  return 0;
}

int NullTree::make(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
                   const std::string& symlink_target, struct stat* st) {
  std::lock_guard lock(mu_);
  Node* dir = find(parent);
  if (!dir) return ENOENT;
  if (!S_ISDIR(dir->st.st_mode)) return ENOTDIR;
  if (dir->names.count(name)) return EEXIST;
  const uint64_t ino = next_ino_++;
  const uint64_t cookie = dir->next_cookie++;
  dir->names.emplace(name, std::make_pair(ino, cookie));
  dir->by_cookie.emplace(cookie, name);
  touch(*dir, true);
  const bool is_dir = S_ISDIR(mode);
  if (is_dir) dir->st.st_nlink++;
  Node& n = nodes_[ino];
  n.st.st_ino = ino;
  n.st.st_mode = mode;
  n.st.st_nlink = is_dir ? 2 : 1;
  n.st.st_uid = uid;
  n.st.st_gid = gid;
  n.st.st_rdev = rdev;
  n.st.st_blksize = 4096;
  n.st.st_atim = n.st.st_mtim = n.st.st_ctim = now();
  n.parent = parent;
  n.target = symlink_target;
  n.st.st_size = off_t(symlink_target.size());
  n.lookups = 1;
  *st = n.st;
  return 0;
}

int NullTree::link(uint64_t ino, uint64_t parent, const std::string& name, struct stat* st) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  Node* dir = find(parent);
  if (!n || !dir) return ENOENT;
  if (S_ISDIR(n->st.st_mode)) return EPERM;
  if (dir->names.count(name)) return EEXIST;
  const uint64_t cookie = dir->next_cookie++;
  dir->names.emplace(name, std::make_pair(ino, cookie));
  dir->by_cookie.emplace(cookie, name);
  touch(*dir, true);
  n->st.st_nlink++;
  n->lookups++;
  touch(*n, false);
  *st = n->st;
  return 0;
}

void NullTree::drop_name(Node& dir, const std::string& name) {
  auto it = dir.names.find(name);
  dir.by_cookie.erase(it->second.second);
  dir.names.erase(it);
  touch(dir, true);
}

int NullTree::unlink(uint64_t parent, const std::string& name, bool want_dir) {
  std::lock_guard lock(mu_);
  Node* dir = find(parent);
  if (!dir) return ENOENT;
  auto it = dir->names.find(name);
  if (it == dir->names.end()) return ENOENT;
  const uint64_t ino = it->second.first;
  Node& n = nodes_.at(ino);
  const bool is_dir = S_ISDIR(n.st.st_mode);
  if (want_dir && !is_dir) return ENOTDIR;
  if (!want_dir && is_dir) return EISDIR;
  if (is_dir && !n.names.empty()) return ENOTEMPTY;
  drop_name(*dir, name);
  if (is_dir) dir->st.st_nlink--, n.st.st_nlink = 0;
  else n.st.st_nlink--;
  touch(n, false);
  maybe_free(ino);
  return 0;
}

int NullTree::rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname,
                     unsigned flags) {
  std::lock_guard lock(mu_);
  Node* from = find(parent);
  Node* to = find(newparent);
  if (!from || !to) return ENOENT;
  auto src = from->names.find(name);
  if (src == from->names.end()) return ENOENT;
  const uint64_t ino = src->second.first;
  auto dst = to->names.find(newname);
  const bool exists = dst != to->names.end();
  if ((flags & RENAME_NOREPLACE) && exists) return EEXIST;
  if (flags & RENAME_EXCHANGE) {
    if (!exists) return ENOENT;
    std::swap(src->second.first, dst->second.first);
    nodes_.at(src->second.first).parent = parent;
    nodes_.at(dst->second.first).parent = newparent;
    touch(*from, true), touch(*to, true);
    return 0;
  }
  if (flags & ~unsigned(RENAME_NOREPLACE)) return EINVAL;
  if (parent == newparent && name == newname) return 0;
  const bool is_dir = S_ISDIR(nodes_.at(ino).st.st_mode);
  if (exists) {
    const uint64_t victim = dst->second.first;
    Node& v = nodes_.at(victim);
    if (S_ISDIR(v.st.st_mode) != is_dir) return is_dir ? ENOTDIR : EISDIR;
    if (is_dir && !v.names.empty()) return ENOTEMPTY;
    drop_name(*to, newname);
    if (is_dir) to->st.st_nlink--, v.st.st_nlink = 0;
    else v.st.st_nlink--;
    maybe_free(victim);
  }
  drop_name(*from, name);
  const uint64_t cookie = to->next_cookie++;
  to->names.emplace(newname, std::make_pair(ino, cookie));
  to->by_cookie.emplace(cookie, newname);
  touch(*to, true);
  Node& n = nodes_.at(ino);
  if (is_dir && parent != newparent) from->st.st_nlink--, to->st.st_nlink++;
  n.parent = newparent;
  touch(n, false);
  return 0;
}

size_t NullTree::readable(uint64_t ino, uint64_t off, size_t size) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n || off >= uint64_t(n->st.st_size)) return 0;
  return size_t(std::min<uint64_t>(size, uint64_t(n->st.st_size) - off));
}

void NullTree::wrote(uint64_t ino, uint64_t off, size_t size) {
  std::lock_guard lock(mu_);
  Node* n = find(ino);
  if (!n) return;
  if (off + size > uint64_t(n->st.st_size)) n->st.st_size = off_t(off + size);
  n->st.st_blocks = (n->st.st_size + 511) / 512;
  touch(*n, true);
}

int NullTree::readdir(uint64_t ino, uint64_t off, const Filler& fill) {
  // The entries are copied out first: `fill` may call remember(), which takes the lock.
  struct Entry {
    std::string name;
    struct stat st;
    uint64_t next;
  };
  std::vector<Entry> out;
  {
    std::lock_guard lock(mu_);
    Node* dir = find(ino);
    if (!dir) return ENOENT;
    if (!S_ISDIR(dir->st.st_mode)) return ENOTDIR;
    if (off < 1) out.push_back({".", dir->st, 1});
    if (off < 2) out.push_back({"..", nodes_.at(dir->parent).st, 2});
    for (auto it = dir->by_cookie.upper_bound(off); it != dir->by_cookie.end() && out.size() < 512; ++it)
      out.push_back({it->second, nodes_.at(dir->names.at(it->second).first).st, it->first});
  }
  for (const Entry& e : out)
    if (!fill(e.name, e.st, e.next)) break;
  return 0;
}

}  // namespace biofs
