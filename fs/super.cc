// The mount's lifecycle (fs/ext4/super.c, fs/ext4/fsync.c): starting a mount, commits (on
// fsync, when the journal fills, and every commit_interval_s), sync, fsync, statfs, unmount.
#include "super.h"

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "inode_table.h"
#include "io_buf.h"
#include "lib/background_thread.h"

namespace biofs {

using namespace disk;

int Super::start(EndIoWork::Run finish_conversions) {
  if (s_.opts.norecovery && !s_.opts.read_only) return -EINVAL;  // the daemon's parser says so first
  std::string why = s_.opts.norecovery ? "" : s_.journal.recover(&s_.replayed);
  if (!why.empty()) return -EUCLEAN;
  if (s_.replayed) {
    // The superblock itself may have been replayed (it is logged when the orphan list changes).
    SuperBlock now;
    if (std::string e = read_superblock(s_.io, &now, false); !e.empty()) return -EUCLEAN;
    if (std::memcmp(now.uuid, s_.sb.uuid, 16) != 0) return -EUCLEAN;
    s_.sb = now;
  }
  if (int err = s_.alloc.load()) return err;
  InodeObj* root;
  if (int err = itable_.iget(ROOT_INO, &root)) return err;
  if (!S_ISDIR(root->d.mode)) return -EUCLEAN;
  if (!s_.read_only && s_.sb.orphan_head) {
    if (int err = evict_.free_orphans()) return err;
    if (int err = s_.commit.commit_locked()) return err;
  }
  s_.sb.mount_count++;
  s_.sb.mount_time = time(nullptr);
  if (!s_.read_only) {
    if (int err = write_superblock(STATE_DIRTY)) return err;
  }
  s_.mounted = true;
  // The thread role tools/biofs-compare reports.
  if (s_.opts.commit_interval_s)
    committer_ = start_background_thread("biofs-commit", [this](std::stop_token stop) { commit_thread(stop); });
  finish_conversions_ = std::move(finish_conversions);
  if (!s_.read_only) s_.end_io = std::make_unique<EndIoWork>(finish_conversions_);
  return 0;
}

int Super::set_read_only(bool read_only) {
  if (!s_.mounted) return 0;
  if (read_only) {
    if (s_.end_io) s_.end_io->drain();  // the conversions take the lock: before it is held
    std::unique_lock ex(s_.lock);
    if (s_.read_only) return 0;
    s_.read_only = true;
    if (s_.commit.failed()) return 0;  // nothing more is written after a failed commit anyway
    int err = s_.commit.commit_locked();
    if (!err) err = write_superblock(STATE_CLEAN);
    if (!err) err = s_.io.flush();
    return err;
  }
  std::unique_lock ex(s_.lock);
  if (!s_.read_only) return 0;
  // After a failed commit the journal stays as it was until the next mount replays it (ext4
  // refuses a writable remount of an aborted journal, too).
  if (s_.commit.failed()) return s_.commit.failed();
  if (int err = write_superblock(STATE_DIRTY)) return err;
  if (!s_.end_io) s_.end_io = std::make_unique<EndIoWork>(finish_conversions_);
  s_.read_only = false;
  return 0;
}

void Super::commit_thread(std::stop_token stop) {
  for (;;) {
    {
      std::unique_lock g(commit_wait_lock_);
      commit_wait_.wait_for(g, stop, std::chrono::seconds(s_.opts.commit_interval_s), [] { return false; });
    }
    if (stop.stop_requested()) return;
    std::unique_lock ex(s_.lock);
    s_.commit.commit_locked();
  }
}

int Super::write_superblock(uint32_t state) {
  s_.sb.state = state;
  s_.sb.free_blocks = s_.alloc.free_blocks() + s_.alloc.pending_blocks();
  s_.sb.free_inodes = s_.alloc.free_inodes();
  s_.sb.write_time = time(nullptr);
  s_.sb.checksum = superblock_crc(s_.sb);
  IoBuf buf(s_.bs);
  std::memcpy(buf.data(), &s_.sb, sizeof(s_.sb));
  // The backup only when clean: it is what fsck falls back to, so keep it a settled copy.
  if (state == STATE_CLEAN) {
    if (int err = s_.io.write(s_.sb.backup_sb_block, 1, buf.data())) return err;
  }
  return s_.io.write(0, 1, buf.data(), REQ_PREFLUSH | REQ_FUA);
}

void Super::crash() {
  stop_background_thread(committer_);
  if (s_.end_io) s_.end_io->drain();
  s_.end_io.reset();
  s_.mounted = false;
}

int Super::unmount() {
  if (!s_.mounted) return 0;
  stop_background_thread(committer_);
  // Every conversion done (they take the lock) before the worker goes: drained first, since
  // the worker reaches end_io until its last item has ended and reset() clears it at once.
  if (s_.end_io) s_.end_io->drain();
  s_.end_io.reset();
  std::unique_lock ex(s_.lock);
  if (s_.commit.failed()) {  // nothing more may be written: the disk stays as of the last good commit
    s_.mounted = false;
    return s_.commit.failed();
  }
  // Inodes unlinked while open are freed now that nothing holds them; read-only, they stay on
  // the orphan list for the next writable mount.
  std::vector<InodeObj*> orphans;
  for (auto& [ino, in] : s_.inodes)
    if (in->d.nlink == 0 && !s_.read_only) orphans.push_back(in.get());
  for (InodeObj* in : orphans) {
    in->nlookup = 0;
    in->open = 0;
    evict_.maybe_free_inode(in);
    if (int err = s_.commit.maybe_commit()) return err;
  }
  int err = s_.commit.commit_locked();
  if (s_.commit.failed()) err = err ? err : s_.commit.failed();
  if (!err && !s_.read_only) err = write_superblock(STATE_CLEAN);
  if (!err) err = s_.io.flush();
  s_.mounted = false;
  return err;
}

int Super::sync() {
  std::unique_lock ex(s_.lock);
  if (s_.commit.failed()) return s_.commit.refusal();
  if (s_.cache.dirty_count() || s_.alloc.pending_blocks()) return s_.commit.commit_locked();
  return s_.io.flush();
}

// ext4_fsync_journal(): data writes have completed before their write() returned, so a flush
// makes them durable; the running transaction is committed too (its commit block's PREFLUSH
// flushes) only when it changed this inode — for fdatasync, only when it changed more than the
// inode's times. The root directory commits whatever is pending: `sync MNT` is the mount's
// durability point, since syncfs(2) does not reach a FUSE daemon (README.md, "Durability").
// After FUA data writes (write_durable) the flush is left out when there is nothing to commit.
// The flush alone runs with no lock held, as ext4's blkdev_issue_flush(): the device may take
// milliseconds, and reads and writes of every other file would wait for it behind the lock.
int Super::fsync(uint64_t ino, bool datasync, bool data_durable) {
  std::unique_lock ex(s_.lock);
  if (s_.commit.failed()) return s_.commit.refusal();
  auto it = s_.inodes.find(ino);
  const bool changed = ino == disk::ROOT_INO || it == s_.inodes.end() ||
                       (datasync ? it->second->datasync_seq : it->second->sync_seq) >= s_.journal.sequence();
  if (changed && (s_.cache.dirty_count() || s_.alloc.pending_blocks())) return s_.commit.commit_locked();
  ex.unlock();
  return data_durable ? 0 : s_.io.flush();
}

int Super::shutdown(uint32_t flags) {
  if (flags > GOING_FLAGS_NOLOGFLUSH) return -EINVAL;
  std::unique_lock ex(s_.lock);
  if (s_.commit.is_shut_down()) return 0;
  if (flags != GOING_FLAGS_NOLOGFLUSH && !s_.commit.failed()) {
    s_.commit.commit_locked();  // a failure sets failed and says so; the shutdown goes on
    s_.io.flush();
  }
  s_.commit.shut_down();
  fprintf(stderr, "biofs: shut down (%s): no more changes are written until a remount\n",
          flags == GOING_FLAGS_NOLOGFLUSH ? "the running transaction dropped" : "after a commit");
  return 0;
}

int Super::statfs(struct statvfs* st) {
  std::unique_lock ex(s_.lock);
  std::memset(st, 0, sizeof(*st));
  st->f_bsize = s_.bs;
  st->f_frsize = s_.bs;
  st->f_blocks = s_.sb.block_count;
  st->f_bfree = s_.alloc.free_blocks() + s_.alloc.pending_blocks();
  st->f_bavail = st->f_bfree;
  st->f_files = s_.sb.inode_count;
  st->f_ffree = s_.alloc.free_inodes();
  st->f_favail = st->f_ffree;
  st->f_namemax = MAX_NAME_LEN;
  return 0;
}

}  // namespace biofs
