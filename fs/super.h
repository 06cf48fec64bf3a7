// The mount's lifecycle (fs/ext4/super.c, fs/ext4/fsync.c, jbd2's commit timer): starting a
// mount (journal replay, orphans), commits on fsync, sync and every commit_interval_s (when
// the journal fills: commit_policy.h), statfs, shutdown, unmount, and the crash hooks of the tests.
#pragma once

#include <sys/statvfs.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <thread>

#include "end_io_work.h"
#include "evict.h"
#include "fs_info.h"

namespace biofs {

class Super {
 public:
  Super(FsInfo& s, InodeTable& itable, Evict& evict) : s_(s), itable_(itable), evict_(evict) {}

  // Replays the journal, frees the orphans a crash left, marks the superblock dirty, starts
  // the commit thread and the end-io worker, which runs `finish_conversions` (FileIo's) on
  // its batches. 0 or -errno.
  int start(EndIoWork::Run finish_conversions);
  // Commits, writes the superblock clean (primary and backup), flushes. 0 or -errno.
  int unmount();
  // Drops the mount without writing anything more, as a crash would.
  void crash();
  // `data_durable`: the file's data writes went out with FUA, so only a commit is left to do.
  int fsync(uint64_t ino, bool datasync, bool data_durable);
  int sync();  // commit the running transaction and flush
  int statfs(struct statvfs* st);
  // EXT4_IOC_SHUTDOWN (ext4_shutdown(), fs/ext4/ioctl.c, v6.18): EXT4_GOING_FLAGS_DEFAULT and
  // LOGFLUSH commit the running transaction and flush first, NOLOGFLUSH drops it as a crash
  // would; then nothing more is written and every change gets EIO until a remount, whose
  // journal replay brings back what was committed. A second shutdown is a no-op.
  enum ShutdownFlags : uint32_t { GOING_FLAGS_DEFAULT = 0, GOING_FLAGS_LOGFLUSH = 1, GOING_FLAGS_NOLOGFLUSH = 2 };
  int shutdown(uint32_t flags);
  // The mount became read-only or writable again (`mount -o remount,ro|rw`), as in ext4's
  // __ext4_remount() (fs/ext4/super.c, v6.18); the kernel has written back the files' dirty
  // pages and refuses writers already. To read-only: unwritten-extent conversions finish, the
  // running transaction commits and the superblock is written clean, so that nothing more is
  // written (not an atime) and a crash from here loses nothing. To writable: the superblock is
  // marked dirty again. 0 (or no change), or the error of the commit or the superblock write;
  // the filesystem is read-only from the call on either way, since the kernel's mount is.
  int set_read_only(bool read_only);


 private:
  int write_superblock(uint32_t state);
  void commit_thread(std::stop_token stop);

  FsInfo& s_;
  InodeTable& itable_;
  Evict& evict_;
  EndIoWork::Run finish_conversions_;  // the end-io worker's, for a remount to writable
  std::mutex commit_wait_lock_;           // only for commit_wait_'s sleep
  std::condition_variable_any commit_wait_;
  std::jthread committer_;  // last: stopped and joined before the members it uses go
};

}  // namespace biofs
