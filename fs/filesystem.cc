// Mount and unmount, the namespace operations (lookup, create, link, unlink, rename, readdir),
// attributes, and commits (on fsync, when the journal fills, and every commit_interval_s).
#include "filesystem.h"

#include <pthread.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "lib/background_thread.h"
#include "xattr_block.h"

namespace biofs {

using namespace disk;

Filesystem::Filesystem(BlockIo& io, const SuperBlock& sb, const MountOptions& opts)
    : io_(io), sb_(sb), opts_(opts), journal_(io_, sb_), cache_(io_, sb_, journal_, opts.meta_cache_bytes),
      alloc_(cache_, sb_), bs_(sb.block_size) {}

Status Filesystem::mount(BlockIo& io, const MountOptions& opts, std::unique_ptr<Filesystem>* out) {
  out->reset();
  SuperBlock sb;
  io.set_block_size(4096);
  if (std::string why = read_superblock(io, &sb); !why.empty()) return Status::io_error(why);
  io.set_block_size(sb.block_size);
  std::unique_ptr<Filesystem> fs(new Filesystem(io, sb, opts));
  if (int e = fs->start()) return Status::io_error(std::string("mount failed: ") + strerror(-e));
  *out = std::move(fs);
  return Status();
}

int Filesystem::start() {
  std::string why = journal_.recover(&replayed_);
  if (!why.empty()) return -EUCLEAN;
  if (replayed_) {
    // The superblock itself may have been replayed (it is logged when the orphan list changes).
    SuperBlock now;
    if (std::string e = read_superblock(io_, &now, false); !e.empty()) return -EUCLEAN;
    if (std::memcmp(now.uuid, sb_.uuid, 16) != 0) return -EUCLEAN;
    sb_ = now;
  }
  if (int err = alloc_.load()) return err;
  InodeObj* root;
  if (int err = iget(ROOT_INO, &root)) return err;
  if (!S_ISDIR(root->d.mode)) return -EUCLEAN;
  if (!opts_.read_only && sb_.orphan_head) {
    if (int err = free_orphans()) return err;
    if (int err = commit_locked()) return err;
  }
  sb_.mount_count++;
  sb_.mount_time = time(nullptr);
  if (!opts_.read_only) {
    if (int err = write_superblock(STATE_DIRTY)) return err;
  }
  mounted_ = true;
  // The thread role tools/biofs-compare reports.
  if (opts_.commit_interval_s)
    committer_ = start_background_thread("biofs-commit", [this](std::stop_token stop) { commit_thread(stop); });
  if (!opts_.read_only)
    end_io_ = std::make_unique<EndIoWork>([this](std::vector<EndIoWork::Item*>& items) { finish_conversions(items); });
  return 0;
}

Filesystem::~Filesystem() {
  if (mounted_) unmount();
}

void Filesystem::commit_thread(std::stop_token stop) {
  for (;;) {
    {
      std::unique_lock g(commit_wait_lock_);
      commit_wait_.wait_for(g, stop, std::chrono::seconds(opts_.commit_interval_s), [] { return false; });
    }
    if (stop.stop_requested()) return;
    std::unique_lock ex(lock_);
    commit_locked();
  }
}

int Filesystem::write_superblock(uint32_t state) {
  sb_.state = state;
  sb_.free_blocks = alloc_.free_blocks() + alloc_.pending_blocks();
  sb_.free_inodes = alloc_.free_inodes();
  sb_.write_time = time(nullptr);
  sb_.checksum = superblock_crc(sb_);
  IoBuf buf(bs_);
  std::memcpy(buf.data(), &sb_, sizeof(sb_));
  // The backup only when clean: it is what fsck falls back to, so keep it a settled copy.
  if (state == STATE_CLEAN) {
    if (int err = io_.write(sb_.backup_sb_block, 1, buf.data())) return err;
  }
  return io_.write(0, 1, buf.data(), REQ_PREFLUSH | REQ_FUA);
}

void Filesystem::crash() {
  stop_background_thread(committer_);
  if (end_io_) end_io_->drain();
  end_io_.reset();
  mounted_ = false;
}

int Filesystem::unmount() {
  if (!mounted_) return 0;
  stop_background_thread(committer_);
  // Every conversion done (they take the lock) before the worker goes: drained first, since
  // the worker reaches end_io_ until its last item has ended and reset() clears it at once.
  if (end_io_) end_io_->drain();
  end_io_.reset();
  std::unique_lock ex(lock_);
  if (failed_) {  // nothing more may be written: the disk stays as of the last good commit
    mounted_ = false;
    return failed_;
  }
  // Inodes unlinked while open are freed now that nothing holds them.
  std::vector<InodeObj*> orphans;
  for (auto& [ino, in] : inodes_)
    if (in->d.nlink == 0) orphans.push_back(in.get());
  for (InodeObj* in : orphans) {
    in->nlookup = 0;
    in->open = 0;
    maybe_free_inode(in);
    if (int err = maybe_commit()) return err;
  }
  int err = commit_locked();
  if (failed_) err = err ? err : failed_;
  if (!err && !opts_.read_only) err = write_superblock(STATE_CLEAN);
  if (!err) err = io_.flush();
  mounted_ = false;
  return err;
}

int Filesystem::commit_locked() {
  if (failed_) return -EROFS;
  // A metadata read failed: the operation that met it may have stopped half-way (an entry
  // removed, not yet added), so this transaction is not committed (ext4's journal abort).
  if (const int rerr = cache_.read_error()) {
    failed_ = rerr;
    fprintf(stderr, "biofs: metadata read failed (%s): no more changes are written until a remount\n",
            strerror(-rerr));
    return rerr;
  }
  int err = alloc_.release_pending();
  if (!err) err = cache_.commit();
  if (err) {
    failed_ = err;
    fprintf(stderr, "biofs: metadata commit failed (%s): no more changes are written until a remount\n",
            strerror(-err));
    return err;
  }
  cache_.trim();
  return 0;
}

int Filesystem::maybe_commit(uint64_t need_blocks) {
  if (failed_) return -EROFS;
  if (cache_.read_error()) return commit_locked();  // refuses, and says so once
  // Blocks freed by this transaction become allocatable only once it commits: a write right
  // after an rm on a full filesystem would get ENOSPC while df shows the space free.
  if (alloc_.pending_blocks() && alloc_.free_blocks() < need_blocks) return commit_locked();
  // Leave room for the largest single operation (a write of 1 MiB touches a few bitmap blocks,
  // an inode block, the extent tree).
  if (cache_.dirty_count() + alloc_.pending_bitmap_blocks() + 64 > journal_.capacity() / 2)
    return commit_locked();
  cache_.trim();
  return 0;
}

int Filesystem::sync() {
  std::unique_lock ex(lock_);
  if (failed_) return -EROFS;
  if (cache_.dirty_count() || alloc_.pending_blocks()) return commit_locked();
  return io_.flush();
}

// ext4_fsync_journal(): data writes have completed before their write() returned, so a flush
// makes them durable; the running transaction is committed too (its commit block's PREFLUSH
// flushes) only when it changed this inode — for fdatasync, only when it changed more than the
// inode's times. The root directory commits whatever is pending: `sync MNT` is the mount's
// durability point, since syncfs(2) does not reach a FUSE daemon (README.md, "Durability").
// After FUA data writes (write_durable) the flush is left out when there is nothing to commit.
// The flush alone runs with no lock held, as ext4's blkdev_issue_flush(): the device may take
// milliseconds, and reads and writes of every other file would wait for it behind the lock.
int Filesystem::fsync(uint64_t ino, bool datasync, bool data_durable) {
  std::unique_lock ex(lock_);
  if (failed_) return -EROFS;
  auto it = inodes_.find(ino);
  const bool changed = ino == disk::ROOT_INO || it == inodes_.end() ||
                       (datasync ? it->second->datasync_seq : it->second->sync_seq) >= journal_.sequence();
  if (changed && (cache_.dirty_count() || alloc_.pending_blocks())) return commit_locked();
  ex.unlock();
  return data_durable ? 0 : io_.flush();
}

int Filesystem::lookup(uint64_t parent, const std::string& name, struct stat* st) {
  if (name.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  {
    // The common case touches only memory: the directory's index and the inode are loaded.
    std::shared_lock shared(lock_);
    auto d = inodes_.find(parent);
    if (d != inodes_.end() && S_ISDIR(d->second->d.mode) && d->second->dir) {
      auto e = d->second->dir->find(name);
      if (e == d->second->dir->end()) return -ENOENT;
      if (auto c = inodes_.find(e->second.ino); c != inodes_.end()) {
        c->second->nlookup.fetch_add(1, std::memory_order_relaxed);
        fill_stat(c->second.get(), st);
        return 0;
      }
    }
  }
  std::unique_lock ex(lock_);
  InodeObj* dir;
  if (int err = iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc loc;
  if (int err = dir_find(dir, name, &loc)) return err;
  InodeObj* in;
  if (int err = iget(loc.ino, &in)) return err == -ESTALE ? -EUCLEAN : err;
  in->nlookup++;
  fill_stat(in, st);
  return 0;
}

void Filesystem::forget(uint64_t ino, uint64_t nlookup) {
  std::unique_lock ex(lock_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  InodeObj* in = it->second.get();
  const uint64_t had = in->nlookup.load(std::memory_order_relaxed);
  in->nlookup.store(nlookup >= had ? 0 : had - nlookup, std::memory_order_relaxed);
  // Freeing an unlinked inode dirties its table block, the bitmaps and its predecessor on the
  // orphan list: thousands of forgets in a row must commit as they go, as every other
  // operation does, or their transaction outgrows the journal. (A failed commit stops writing
  // and says so; forget has no one to tell.)
  if (maybe_commit() == 0) maybe_free_inode(in);
}

int Filesystem::getattr(uint64_t ino, struct stat* st) {
  std::shared_lock shared(lock_);
  InodeObj* in;
  if (int err = iget_shared(shared, ino, &in)) return err;
  fill_stat(in, st);
  return 0;
}

int Filesystem::setattr(uint64_t ino, int to_set, const struct stat& a, struct stat* out, bool fsetid) {
  std::unique_lock ex(lock_);
  if (int err = maybe_commit()) return err;
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  Inode& d = in->d;
  if (to_set & SETATTR_SIZE) {
    if (S_ISDIR(d.mode)) return -EISDIR;
    if (!S_ISREG(d.mode)) return -EINVAL;
    if (int err = truncate(in, uint64_t(a.st_size))) return err;
  }
  // chown_common() kills the set-id bits of a non-directory whoever calls it; a mode given
  // in the same call is what the caller asked for, and wins.
  const bool chown = to_set & (SETATTR_UID | SETATTR_GID);
  if (((to_set & SETATTR_SIZE) && !fsetid) || (chown && !S_ISDIR(d.mode))) drop_suidgid(d);
  if (to_set & SETATTR_MODE) {
    d.mode = (d.mode & S_IFMT) | (a.st_mode & 07777);
    if (int err = acl_chmod_locked(in)) return err;
  }
  if ((to_set & SETATTR_SIZE) || (chown && !S_ISDIR(d.mode))) {
    if (int err = kill_caps(in)) return err;
  }
  if (to_set & SETATTR_UID) d.uid = a.st_uid;
  if (to_set & SETATTR_GID) d.gid = a.st_gid;
  if (to_set & SETATTR_ATIME_NOW) touch(d, true, false, false);
  else if (to_set & SETATTR_ATIME) d.atime_sec = a.st_atim.tv_sec, d.atime_nsec = uint32_t(a.st_atim.tv_nsec);
  if (to_set & SETATTR_MTIME_NOW) touch(d, false, true, false);
  else if (to_set & SETATTR_MTIME) d.mtime_sec = a.st_mtim.tv_sec, d.mtime_nsec = uint32_t(a.st_mtim.tv_nsec);
  if (to_set & SETATTR_CTIME) d.ctime_sec = a.st_ctim.tv_sec, d.ctime_nsec = uint32_t(a.st_ctim.tv_nsec);
  else touch(d, false, false, true);
  if (int err = isave(in)) return err;
  fill_stat(in, out);
  return 0;
}

int Filesystem::make_node(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid,
                          dev_t rdev, const std::string* target, struct stat* st, mode_t umask) {
  std::unique_lock ex(lock_);
  if (name.empty() || name.size() > MAX_NAME_LEN) return name.empty() ? -EINVAL : -ENAMETOOLONG;
  if (name == "." || name == ".." || name.find('/') != std::string::npos) return -EINVAL;
  if (int err = maybe_commit()) return err;
  InodeObj* dir;
  if (int err = iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  if (dir->d.nlink == 0) return -ENOENT;  // removed directory
  InodeObj::DirLoc loc;
  int err = dir_find(dir, name, &loc);
  if (err == 0) return -EEXIST;
  if (err != -ENOENT) return err;
  if (S_ISDIR(mode) && dir->d.nlink >= UINT32_MAX - 1) return -EMLINK;
  // inode_init_owner(): in a setgid directory the group is the directory's, and a new
  // directory is setgid too.
  if (dir->d.mode & S_ISGID) {
    gid = dir->d.gid;
    if (S_ISDIR(mode)) mode |= S_ISGID;
  }
  std::vector<xattr::Attr> acls;
  if (!target) {
    if (int e = acl_inherit(dir, &mode, umask, &acls)) return e;
  }
  InodeObj* in;
  if (int e = new_inode(mode, uid, gid, &in)) return e;
  in->d.nlink = S_ISDIR(mode) ? 2 : 1;
  in->d.rdev = uint32_t(rdev);
  if (S_ISDIR(mode)) in->d.parent = parent;
  in->has_caps = 0;
  err = acls.empty() ? 0 : xattr_store(in, acls);
  if (target && !err) {
    in->d.size = target->size();
    if (target->size() <= sizeof(in->d.inline_data)) {
      in->d.flags |= INODE_INLINE_DATA;
      std::memcpy(in->d.inline_data, target->data(), target->size());
    } else {
      // A long target is file data in one block (targets are at most PATH_MAX = 4096 bytes).
      const uint64_t nb = (target->size() + bs_ - 1) / bs_;
      err = allocate_range(in, 0, nb);
      if (!err) {
        IoBuf buf(nb * bs_);
        std::memcpy(buf.data(), target->data(), target->size());
        uint64_t run;
        const uint64_t p = map_block(in, 0, &run, nullptr);
        err = run >= nb ? io_.write(p, uint32_t(nb), buf.data()) : -ENOSPC;
      }
    }
  }
  if (!err) err = save_extents(in);
  if (!err) err = dir_add(dir, name, in->ino, dirent_type(mode));
  if (err) {
    in->d.nlink = 0;
    maybe_free_inode(in);
    return err;
  }
  if (S_ISDIR(mode)) dir->d.nlink++;
  touch(dir->d, false, true, true);
  if ((err = isave(dir))) return err;
  in->nlookup++;
  fill_stat(in, st);
  return 0;
}

int Filesystem::mknod(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
                      struct stat* st, mode_t umask) {
  if (S_ISDIR(mode) || S_ISLNK(mode)) return -EINVAL;
  if (!(mode & S_IFMT)) mode |= S_IFREG;
  return make_node(parent, name, mode, uid, gid, rdev, nullptr, st, umask);
}

int Filesystem::mkdir(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, struct stat* st,
                      mode_t umask) {
  return make_node(parent, name, S_IFDIR | (mode & 07777), uid, gid, 0, nullptr, st, umask);
}

int Filesystem::symlink(uint64_t parent, const std::string& name, const std::string& target, uid_t uid, gid_t gid,
                        struct stat* st) {
  if (target.empty() || target.size() >= 4096) return target.empty() ? -ENOENT : -ENAMETOOLONG;
  return make_node(parent, name, S_IFLNK | 0777, uid, gid, 0, &target, st);
}

int Filesystem::readlink(uint64_t ino, std::string* target) {
  std::unique_lock ex(lock_);
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  if (!S_ISLNK(in->d.mode)) return -EINVAL;
  if (in->d.size > symlink_max_size(in->d)) return -EUCLEAN;
  if (in->d.flags & INODE_INLINE_DATA) {
    target->assign(in->d.inline_data, in->d.size);
    return 0;
  }
  const uint64_t nb = (in->d.size + bs_ - 1) / bs_;
  IoBuf buf(nb * bs_);
  if (int err = read_blocks(in, 0, nb, buf.data())) return err;
  target->assign(reinterpret_cast<const char*>(buf.data()), in->d.size);
  return 0;
}

int Filesystem::link(uint64_t ino, uint64_t newparent, const std::string& newname, struct stat* st) {
  std::unique_lock ex(lock_);
  if (newname.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  if (int err = maybe_commit()) return err;
  InodeObj *in, *dir;
  if (int err = iget(ino, &in)) return err;
  if (S_ISDIR(in->d.mode)) return -EPERM;
  if (in->d.nlink >= UINT32_MAX - 1) return -EMLINK;
  if (int err = iget(newparent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc loc;
  if (dir_find(dir, newname, &loc) == 0) return -EEXIST;
  if (int err = dir_add(dir, newname, ino, dirent_type(in->d.mode))) return err;
  in->d.nlink++;
  touch(in->d, false, false, true);
  touch(dir->d, false, true, true);
  if (int err = isave(in)) return err;
  if (int err = isave(dir)) return err;
  in->nlookup++;
  fill_stat(in, st);
  return 0;
}

int Filesystem::remove_entry(uint64_t parent, const std::string& name, bool want_dir) {
  std::unique_lock ex(lock_);
  if (int err = maybe_commit()) return err;
  InodeObj* dir;
  if (int err = iget(parent, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc loc;
  if (int err = dir_find(dir, name, &loc)) return err;
  InodeObj* in;
  if (int err = iget(loc.ino, &in)) return err;
  const bool is_dir = S_ISDIR(in->d.mode);
  if (want_dir && !is_dir) return -ENOTDIR;
  if (!want_dir && is_dir) return -EISDIR;
  if (int err = drop_entry(dir, name, in)) return err;
  touch(dir->d, false, true, true);
  if (int err = isave(dir)) return err;
  maybe_free_inode(in);
  return 0;
}

int Filesystem::drop_entry(InodeObj* dir, const std::string& name, InodeObj* victim) {
  if (S_ISDIR(victim->d.mode) && !dir_empty(victim)) return -ENOTEMPTY;
  if (int err = dir_remove(dir, name)) return err;
  return drop_links(dir, victim);
}

int Filesystem::drop_links(InodeObj* dir, InodeObj* victim) {
  if (S_ISDIR(victim->d.mode)) {
    victim->d.nlink = 0;
    dir->d.nlink--;  // its ".." named `dir`
  } else {
    victim->d.nlink--;
  }
  touch(victim->d, false, false, true);
  return isave(victim);
}

int Filesystem::unlink(uint64_t parent, const std::string& name) { return remove_entry(parent, name, false); }
int Filesystem::rmdir(uint64_t parent, const std::string& name) { return remove_entry(parent, name, true); }

int Filesystem::rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname,
                       unsigned flags) {
  std::unique_lock ex(lock_);
  if (flags & ~unsigned(RENAME_NOREPLACE | RENAME_EXCHANGE)) return -EINVAL;
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return -EINVAL;
  if (newname.size() > MAX_NAME_LEN) return -ENAMETOOLONG;
  if (int err = maybe_commit()) return err;
  InodeObj *sdir, *ddir, *src, *dst = nullptr;
  if (int err = iget(parent, &sdir)) return err;
  if (int err = iget(newparent, &ddir)) return err;
  if (!S_ISDIR(sdir->d.mode) || !S_ISDIR(ddir->d.mode)) return -ENOTDIR;
  InodeObj::DirLoc sloc, dloc;
  if (int err = dir_find(sdir, name, &sloc)) return err;
  if (int err = iget(sloc.ino, &src)) return err;
  int err = dir_find(ddir, newname, &dloc);
  if (err && err != -ENOENT) return err;
  if (!err) {
    if (flags & RENAME_NOREPLACE) return -EEXIST;
    if ((err = iget(dloc.ino, &dst))) return err;
  } else if (flags & RENAME_EXCHANGE) {
    return -ENOENT;
  }
  if (dst == src) return 0;
  const bool sdir_is = S_ISDIR(src->d.mode);
  // A directory may not move below itself: walk up from the new parent.
  if (sdir_is && parent != newparent) {
    for (uint64_t p = newparent, steps = 0; p != ROOT_INO; steps++) {
      if (steps > sb_.inode_count) return -EUCLEAN;  // damaged parent links that loop
      if (p == src->ino) return -EINVAL;
      InodeObj* pi;
      if ((err = iget(p, &pi))) return err;
      p = pi->d.parent;
      if (p == 0) break;
    }
  }
  if (flags & RENAME_EXCHANGE) {
    const bool ddir_is = S_ISDIR(dst->d.mode);
    if (ddir_is && parent != newparent) {
      for (uint64_t p = parent, steps = 0; p != ROOT_INO && p; steps++) {
        if (steps > sb_.inode_count) return -EUCLEAN;
        if (p == dst->ino) return -EINVAL;
        InodeObj* pi;
        if ((err = iget(p, &pi))) return err;
        p = pi->d.parent;
      }
    }
    // Both names stay where they are and swap inodes: nothing to allocate, nothing half-done.
    if ((err = dir_replace(sdir, name, dst->ino, dirent_type(dst->d.mode)))) return err;
    if ((err = dir_replace(ddir, newname, src->ino, dirent_type(src->d.mode)))) return err;
    if (sdir_is != ddir_is && parent != newparent) {
      if (sdir_is) sdir->d.nlink--, ddir->d.nlink++;
      else sdir->d.nlink++, ddir->d.nlink--;
    }
    if (sdir_is) src->d.parent = newparent;
    if (ddir_is) dst->d.parent = parent;
    touch(dst->d, false, false, true);
    if ((err = isave(dst))) return err;
  } else {
    // The new name first, made in place over the old target or in free space, so that a
    // failure (no space for the entry) leaves the namespace as it was; then the old name goes.
    if (dst) {
      const bool ddir_is = S_ISDIR(dst->d.mode);
      if (sdir_is && !ddir_is) return -ENOTDIR;
      if (!sdir_is && ddir_is) return -EISDIR;
      if (ddir_is && !dir_empty(dst)) return -ENOTEMPTY;
      if ((err = dir_replace(ddir, newname, src->ino, dirent_type(src->d.mode)))) return err;
    } else if ((err = dir_add(ddir, newname, src->ino, dirent_type(src->d.mode)))) {
      return err;
    }
    if ((err = dir_remove(sdir, name))) return err;
    if (dst && (err = drop_links(ddir, dst))) return err;
    if (sdir_is && parent != newparent) {
      sdir->d.nlink--;
      ddir->d.nlink++;
      src->d.parent = newparent;
    }
  }
  touch(src->d, false, false, true);
  touch(sdir->d, false, true, true);
  touch(ddir->d, false, true, true);
  if ((err = isave(src)) || (err = isave(sdir)) || (err = isave(ddir))) return err;
  if (dst && dst->d.nlink == 0) maybe_free_inode(dst);
  return 0;
}

int Filesystem::open(uint64_t ino, bool truncate_it, bool direct_writer, bool* cache_valid) {
  std::unique_lock ex(lock_);
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  if (truncate_it && S_ISREG(in->d.mode)) {
    if (opts_.read_only) return -EROFS;
    if (int err = maybe_commit()) return err;
    if (int err = truncate(in, 0)) return err;
  }
  in->open++;
  if (direct_writer) {
    in->direct_writers++;
    in->cache_stale = true;
  } else if (cache_valid) {
    *cache_valid = !in->cache_stale;
    if (!in->direct_writers) in->cache_stale = false;  // this open drops what the kernel had
  }
  return 0;
}

int Filesystem::release(uint64_t ino, bool direct_writer) {
  std::unique_lock ex(lock_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return 0;
  InodeObj* in = it->second.get();
  if (in->open) in->open--;
  if (direct_writer && in->direct_writers) in->direct_writers--;
  if (int err = maybe_commit()) return err;  // as forget(): a run of last closes commits as it goes
  maybe_free_inode(in);
  return 0;
}

int Filesystem::readdir(uint64_t ino, uint64_t off,
                        const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn) {
  std::unique_lock ex(lock_);
  InodeObj* dir;
  if (int err = iget(ino, &dir)) return err;
  if (!S_ISDIR(dir->d.mode)) return -ENOTDIR;
  if (int err = dir_load(dir)) return err;  // checks every entry of every block (dir.cc)
  // Offsets: 1 after ".", 2 after "..", then 3 + lblk * block_size + the entry's byte offset
  // (+1 for the next one), stable while other entries come and go.
  if (off < 1 && !fn(".", ino, DT_DIR, 1)) return 0;
  if (off < 2 && !fn("..", dir->d.parent ? dir->d.parent : ino, DT_DIR, 2)) return 0;
  const uint64_t nblocks = dir->d.size / bs_;
  for (uint64_t lblk = off < 3 ? 0 : (off - 3) / bs_; lblk < nblocks; lblk++) {
    uint64_t run;
    const uint64_t pblk = map_block(dir, lblk, &run, nullptr);
    if (!pblk) return -EUCLEAN;
    Buffer* b;
    if (int err = cache_.get(pblk, BLK_DIR, &b)) return err;
    for (uint32_t o = sizeof(DirBlock); o < bs_;) {
      const auto* e = reinterpret_cast<const DirEntry*>(b->data.data() + o);
      if (e->rec_len < sizeof(DirEntry) || o + e->rec_len > bs_) return -EUCLEAN;
      const uint64_t pos = 3 + lblk * bs_ + o;
      if (e->ino && pos >= off) {
        if (!fn(std::string(reinterpret_cast<const char*>(e + 1), e->name_len), e->ino, e->type, pos + 1)) return 0;
      }
      o += e->rec_len;
    }
  }
  return 0;
}

int Filesystem::statfs(struct statvfs* st) {
  std::unique_lock ex(lock_);
  std::memset(st, 0, sizeof(*st));
  st->f_bsize = bs_;
  st->f_frsize = bs_;
  st->f_blocks = sb_.block_count;
  st->f_bfree = alloc_.free_blocks() + alloc_.pending_blocks();
  st->f_bavail = st->f_bfree;
  st->f_files = sb_.inode_count;
  st->f_ffree = alloc_.free_inodes();
  st->f_favail = st->f_ffree;
  st->f_namemax = MAX_NAME_LEN;
  return 0;
}

}  // namespace biofs
