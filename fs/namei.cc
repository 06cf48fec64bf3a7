// The namespace operations (fs/namei.c, fs/ext4/namei.c): lookup, create, link, unlink,
// rename, readdir, readlink.
#include "namei.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>

#include <cerrno>
#include <cstring>

#include "attr_flags.h"
#include "dir.h"
#include "extent_map.h"
#include "inode_table.h"
#include "io_buf.h"
#include "xattr.h"
#include "xattr_block.h"

namespace biofs {

using namespace disk;

int Namei::lookup(uint64_t parent, const std::string& name, struct stat* st) {
  if (name.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  if (name == "." || name == "..") {  // a file handle's inode, or a directory's parent
    std::unique_lock ex(s_.lock);
    InodeObj* in;
    if (int err = itable_.iget(parent, &in)) return err;
    if (in->d.nlink == 0) return -ESTALE;
    if (name == "..") {
      if (!S_ISDIR(in->d.mode)) return -ENOTDIR;
      if (int err = itable_.iget(in->d.parent ? in->d.parent : parent, &in)) return err;
    }
    in->nlookup++;
    itable_.fill_stat(in, st);
    return 0;
  }
  {
    // The common case touches only memory: the directory's index and the inode are loaded.
    std::shared_lock shared(s_.lock);
    auto d = s_.inodes.find(parent);
    if (d != s_.inodes.end() && S_ISDIR(d->second->d.mode) && d->second->dir) {
      auto e = d->second->dir->find(name);
      if (e == d->second->dir->end()) return -ENOENT;
      if (auto c = s_.inodes.find(e->second.ino); c != s_.inodes.end()) {
        c->second->nlookup.fetch_add(1, std::memory_order_relaxed);
        itable_.fill_stat(c->second.get(), st);
        return 0;
      }
    }
  }
  std::unique_lock ex(s_.lock);
  InodeObj* dir;
  if (int err = itable_.iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc loc;
  if (int err = dirs_.dir_find(dir, name, &loc)) return err;
  InodeObj* in;
  if (int err = itable_.iget(loc.ino, &in)) return err == -ESTALE ? -EUCLEAN : err;
  in->nlookup++;
  itable_.fill_stat(in, st);
  return 0;
}

uint32_t Namei::generation(uint64_t ino) {
  std::shared_lock shared(s_.lock);
  auto it = s_.inodes.find(ino);
  return it == s_.inodes.end() ? 0 : it->second->d.generation;
}

// A new inode for `dir` (inode_init_owner(): in a setgid directory the group is the
// directory's, and a new directory is setgid too), with the directory's default ACL when
// `inherit_acl` (posix_acl_create). Returns an error with no inode made; *store_err: storing
// the inherited ACLs failed, the inode made (the caller frees it).
int Namei::new_child(InodeObj* dir, mode_t mode, uid_t uid, gid_t gid, mode_t umask, bool inherit_acl,
                     InodeObj** out, int* store_err) {
  if (dir->d.mode & S_ISGID) {
    gid = dir->d.gid;
    if (S_ISDIR(mode)) mode |= S_ISGID;
  }
  std::vector<xattr::Attr> acls;
  if (inherit_acl) {
    if (int e = xattrs_.acl_inherit(dir, &mode, umask, &acls)) return e;
  }
  if (int e = itable_.new_inode(mode, uid, gid, out)) return e;
  (*out)->has_caps = 0;
  *store_err = acls.empty() ? 0 : xattrs_.xattr_store(*out, acls);
  return 0;
}

int Namei::make_node(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid,
                     dev_t rdev, const std::string* target, struct stat* st, mode_t umask) {
  std::unique_lock ex(s_.lock);
  if (name.empty() || name.size() > MAX_NAME_LEN) return name.empty() ? -EINVAL : -ENAMETOOLONG;
  if (name == "." || name == ".." || name.find('/') != std::string::npos) return -EINVAL;
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* dir;
  if (int err = itable_.iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  if (dir->d.nlink == 0) return -ENOENT;  // removed directory
  if (int err = may_create_in(dir)) return err;
  InodeObj::DirLoc loc;
  int err = dirs_.dir_find(dir, name, &loc);
  if (err == 0) return -EEXIST;
  if (err != -ENOENT) return err;
  if (S_ISDIR(mode) && dir->d.nlink >= UINT32_MAX - 1) return -EMLINK;
  InodeObj* in;
  if (int e = new_child(dir, mode, uid, gid, umask, !target, &in, &err)) return e;
  in->d.nlink = S_ISDIR(in->d.mode) ? 2 : 1;
  in->d.rdev = uint32_t(rdev);
  if (S_ISDIR(in->d.mode)) in->d.parent = parent;
  mode = in->d.mode;
  if (target && !err) {
    in->d.size = target->size();
    if (target->size() <= sizeof(in->d.inline_data)) {
      in->d.flags |= INODE_INLINE_DATA;
      std::memcpy(in->d.inline_data, target->data(), target->size());
    } else {
      // A long target is file data in one block (targets are at most PATH_MAX = 4096 bytes).
      const uint64_t nb = (target->size() + s_.bs - 1) / s_.bs;
      err = extents_.allocate_range(in, 0, nb);
      if (!err) {
        IoBuf buf(nb * s_.bs);
        std::memcpy(buf.data(), target->data(), target->size());
        uint64_t run;
        const uint64_t p = extents_.map_block(in, 0, &run, nullptr);
        err = run >= nb ? s_.io.write(p, uint32_t(nb), buf.data()) : -ENOSPC;
      }
    }
  }
  if (!err) err = extents_.save_extents(in);
  if (!err) err = dirs_.dir_add(dir, name, in->ino, dirent_type(mode));
  if (err) {
    in->d.nlink = 0;
    evict_.maybe_free_inode(in);
    return err;
  }
  if (S_ISDIR(mode)) dir->d.nlink++;
  InodeTable::touch(dir->d, false, true, true);
  if ((err = itable_.isave(dir))) return err;
  in->nlookup++;
  itable_.fill_stat(in, st);
  return 0;
}

int Namei::mknod(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
                 struct stat* st, mode_t umask) {
  if (S_ISDIR(mode) || S_ISLNK(mode)) return -EINVAL;
  if (!(mode & S_IFMT)) mode |= S_IFREG;
  return make_node(parent, name, mode, uid, gid, rdev, nullptr, st, umask);
}

int Namei::mkdir(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, struct stat* st,
                 mode_t umask) {
  return make_node(parent, name, S_IFDIR | (mode & 07777), uid, gid, 0, nullptr, st, umask);
}

int Namei::symlink(uint64_t parent, const std::string& name, const std::string& target, uid_t uid, gid_t gid,
                   struct stat* st) {
  if (target.empty() || target.size() >= 4096) return target.empty() ? -ENOENT : -ENAMETOOLONG;
  return make_node(parent, name, S_IFLNK | 0777, uid, gid, 0, &target, st);
}

int Namei::tmpfile(uint64_t parent, mode_t mode, uid_t uid, gid_t gid, struct stat* st, mode_t umask) {
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* dir;
  if (int err = itable_.iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  if (dir->d.nlink == 0) return -ENOENT;
  if (int err = may_create_in(dir)) return err;
  InodeObj* in;
  int err;
  if (int e = new_child(dir, S_IFREG | (mode & 07777), uid, gid, umask, true, &in, &err)) return e;
  in->d.nlink = 0;
  if (!err) err = itable_.orphan_add(in);  // saves the inode too
  if (err) {
    evict_.maybe_free_inode(in);
    return err;
  }
  in->nlookup++;
  itable_.fill_stat(in, st);
  return 0;
}

int Namei::readlink(uint64_t ino, std::string* target) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (!S_ISLNK(in->d.mode)) return -EINVAL;
  if (in->d.size > symlink_max_size(in->d)) return -EUCLEAN;
  if (in->d.flags & INODE_INLINE_DATA) {
    target->assign(in->d.inline_data, in->d.size);
    return 0;
  }
  const uint64_t nb = (in->d.size + s_.bs - 1) / s_.bs;
  IoBuf buf(nb * s_.bs);
  if (int err = file_io_.read_blocks(in, 0, nb, buf.data())) return err;
  target->assign(reinterpret_cast<const char*>(buf.data()), in->d.size);
  return 0;
}

int Namei::link(uint64_t ino, uint64_t newparent, const std::string& newname, struct stat* st) {
  std::unique_lock ex(s_.lock);
  if (newname.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj *in, *dir;
  if (int err = itable_.iget(ino, &in)) return err;
  if (S_ISDIR(in->d.mode)) return -EPERM;
  if (in->d.nlink >= UINT32_MAX - 1) return -EMLINK;
  if (int err = itable_.iget(newparent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  if (int err = may_create_in(dir)) return err;
  if (int err = may_link(in)) return err;
  InodeObj::DirLoc loc;
  if (dirs_.dir_find(dir, newname, &loc) == 0) return -EEXIST;
  if (int err = dirs_.dir_add(dir, newname, ino, dirent_type(in->d.mode))) return err;
  if (in->d.nlink == 0) {
    if (int err = itable_.orphan_remove(in)) return err;
  }
  in->d.nlink++;
  InodeTable::touch(in->d, false, false, true);
  InodeTable::touch(dir->d, false, true, true);
  if (int err = itable_.isave(in)) return err;
  if (int err = itable_.isave(dir)) return err;
  in->nlookup++;
  itable_.fill_stat(in, st);
  return 0;
}

int Namei::remove_entry(uint64_t parent, const std::string& name, bool want_dir) {
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* dir;
  if (int err = itable_.iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc loc;
  if (int err = dirs_.dir_find(dir, name, &loc)) return err;
  InodeObj* in;
  if (int err = itable_.iget(loc.ino, &in)) return err;
  const bool is_dir = S_ISDIR(in->d.mode);
  if (want_dir && !is_dir) return -ENOTDIR;
  if (!want_dir && is_dir) return -EISDIR;
  if (int err = may_delete_from(dir, in)) return err;
  if (int err = drop_entry(dir, name, in)) return err;
  InodeTable::touch(dir->d, false, true, true);
  if (int err = itable_.isave(dir)) return err;
  evict_.maybe_free_inode(in);
  return 0;
}

int Namei::drop_entry(InodeObj* dir, const std::string& name, InodeObj* victim) {
  if (S_ISDIR(victim->d.mode) && !dirs_.dir_empty(victim)) return -ENOTEMPTY;
  if (int err = dirs_.dir_remove(dir, name)) return err;
  return drop_links(dir, victim);
}

int Namei::drop_links(InodeObj* dir, InodeObj* victim) {
  if (S_ISDIR(victim->d.mode)) {
    victim->d.nlink = 0;
    dir->d.nlink--;  // its ".." named `dir`
  } else {
    victim->d.nlink--;
  }
  InodeTable::touch(victim->d, false, false, true);
  return itable_.isave(victim);
}

int Namei::unlink(uint64_t parent, const std::string& name) { return remove_entry(parent, name, false); }

int Namei::rmdir(uint64_t parent, const std::string& name) { return remove_entry(parent, name, true); }

int Namei::rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname,
                  unsigned flags, uid_t uid, gid_t gid) {
  std::unique_lock ex(s_.lock);
  if (flags & ~unsigned(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) return -EINVAL;
  if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))) return -EINVAL;
  if (newname.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj *sdir, *ddir, *src, *dst = nullptr;
  if (int err = itable_.iget(parent, &sdir)) return err;
  if (int err = itable_.iget(newparent, &ddir)) return err;
  if (!S_ISDIR(sdir->d.mode) || !S_ISDIR(ddir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc sloc, dloc;
  if (int err = dirs_.dir_find(sdir, name, &sloc)) return err;
  if (int err = itable_.iget(sloc.ino, &src)) return err;
  int err = dirs_.dir_find(ddir, newname, &dloc);
  if (err && err != -ENOENT) return err;
  if (!err) {
    if (flags & RENAME_NOREPLACE) return -EEXIST;
    if ((err = itable_.iget(dloc.ino, &dst))) return err;
  } else if (flags & RENAME_EXCHANGE) {
    return -ENOENT;
  }
  if (dst == src) return 0;
  // vfs_rename(): the name leaves its directory as an unlink would; the one it replaces too,
  // or else a name is made in the new directory.
  if ((err = may_delete_from(sdir, src))) return err;
  if ((err = dst ? may_delete_from(ddir, dst) : may_create_in(ddir))) return err;
  const bool sdir_is = S_ISDIR(src->d.mode);
  // A directory may not move below itself: walk up from the new parent.
  if (sdir_is && parent != newparent) {
    for (uint64_t p = newparent, steps = 0; p != ROOT_INO; steps++) {
      if (steps > s_.sb.inode_count) return -EUCLEAN;  // damaged parent links that loop
      if (p == src->ino) return -EINVAL;
      InodeObj* pi;
      if ((err = itable_.iget(p, &pi))) return err;
      p = pi->d.parent;
      if (p == 0) break;
    }
  }
  if (flags & RENAME_EXCHANGE) {
    const bool ddir_is = S_ISDIR(dst->d.mode);
    if (ddir_is && parent != newparent) {
      for (uint64_t p = parent, steps = 0; p != ROOT_INO && p; steps++) {
        if (steps > s_.sb.inode_count) return -EUCLEAN;
        if (p == dst->ino) return -EINVAL;
        InodeObj* pi;
        if ((err = itable_.iget(p, &pi))) return err;
        p = pi->d.parent;
      }
    }
    // Both names stay where they are and swap inodes: nothing to allocate, nothing half-done.
    if ((err = dirs_.dir_replace(sdir, name, dst->ino, dirent_type(dst->d.mode)))) return err;
    if ((err = dirs_.dir_replace(ddir, newname, src->ino, dirent_type(src->d.mode)))) return err;
    if (sdir_is != ddir_is && parent != newparent) {
      if (sdir_is) sdir->d.nlink--, ddir->d.nlink++;
      else sdir->d.nlink++, ddir->d.nlink--;
    }
    if (sdir_is) src->d.parent = newparent;
    if (ddir_is) dst->d.parent = parent;
    InodeTable::touch(dst->d, false, false, true);
    if ((err = itable_.isave(dst))) return err;
  } else {
    // The new name first, made in place over the old target or in free space, so that a
    // failure (no space for the entry) leaves the namespace as it was; then the old name goes.
    if (dst) {
      const bool ddir_is = S_ISDIR(dst->d.mode);
      if (sdir_is && !ddir_is) return -ENOTDIR;
      if (!sdir_is && ddir_is) return -EISDIR;
      if (ddir_is && !dirs_.dir_empty(dst)) return -ENOTEMPTY;
      if ((err = dirs_.dir_replace(ddir, newname, src->ino, dirent_type(src->d.mode)))) return err;
    } else if ((err = dirs_.dir_add(ddir, newname, src->ino, dirent_type(src->d.mode)))) {
      return err;
    }
    if (flags & RENAME_WHITEOUT) {
      InodeObj* wh;
      if ((err = itable_.new_inode(S_IFCHR, uid, gid, &wh))) return err;
      wh->d.nlink = 1;
      wh->d.rdev = 0;  // WHITEOUT_DEV
      wh->has_caps = 0;
      if ((err = itable_.isave(wh)) ||
          (err = dirs_.dir_replace(sdir, name, wh->ino, dirent_type(S_IFCHR)))) {
        wh->d.nlink = 0;
        evict_.maybe_free_inode(wh);
        return err;
      }
      evict_.maybe_free_inode(wh);  // nothing holds it: evicted from memory, kept on disk
    } else if ((err = dirs_.dir_remove(sdir, name))) {
      return err;
    }
    if (dst && (err = drop_links(ddir, dst))) return err;
    if (sdir_is && parent != newparent) {
      sdir->d.nlink--;
      ddir->d.nlink++;
      src->d.parent = newparent;
    }
  }
  InodeTable::touch(src->d, false, false, true);
  InodeTable::touch(sdir->d, false, true, true);
  InodeTable::touch(ddir->d, false, true, true);
  if ((err = itable_.isave(src)) || (err = itable_.isave(sdir)) || (err = itable_.isave(ddir))) return err;
  if (dst && dst->d.nlink == 0) evict_.maybe_free_inode(dst);
  return 0;
}

int Namei::readdir(uint64_t ino, uint64_t off,
                   const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn) {
  std::unique_lock ex(s_.lock);
  InodeObj* dir;
  if (int err = itable_.iget(ino, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  const int err = iterate_dir(dir, off, fn);
  // iterate_dir()'s file_accessed(): a listing that was read moves the directory's atime.
  if (!err) itable_.accessed(dir);
  return err;
}

int Namei::iterate_dir(InodeObj* dir, uint64_t off,
                       const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn) {
  const uint64_t ino = dir->ino;
  if (int err = dirs_.dir_load(dir)) return err;  // checks every entry of every block (dir.cc)
  // Offsets: 1 after ".", 2 after "..", then 3 + lblk * block_size + the entry's byte offset
  // (+1 for the next one), stable while other entries come and go.
  if (off < 1 && !fn(".", ino, DT_DIR, 1)) return 0;
  if (off < 2 && !fn("..", dir->d.parent ? dir->d.parent : ino, DT_DIR, 2)) return 0;
  const uint64_t nblocks = dir->d.size / s_.bs;
  for (uint64_t lblk = off < 3 ? 0 : (off - 3) / s_.bs; lblk < nblocks; lblk++) {
    uint64_t run;
    const uint64_t pblk = extents_.map_block(dir, lblk, &run, nullptr);
    if (!pblk) return -EUCLEAN;
    Buffer* b;
    if (int err = s_.cache.get(pblk, BLK_DIR, &b)) return err;
    for (uint32_t o = sizeof(DirBlock); o < s_.bs;) {
      const auto* e = reinterpret_cast<const DirEntry*>(b->data.data() + o);
      if (e->rec_len < sizeof(DirEntry) || o + e->rec_len > s_.bs) return -EUCLEAN;
      const uint64_t pos = 3 + lblk * s_.bs + o;
      if (e->ino && pos >= off) {
        if (!fn(std::string(reinterpret_cast<const char*>(e + 1), e->name_len), e->ino, e->type, pos + 1)) return 0;
      }
      o += e->rec_len;
    }
  }
  return 0;
}

}  // namespace biofs
