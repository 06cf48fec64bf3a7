// The running transaction's commits, and when they happen: jbd2's commit when the journal nears
// its capacity (start_this_handle() -> jbd2_log_start_commit(), fs/jbd2/transaction.c, v6.18),
// ext4_should_retry_alloc()'s forced commit before an allocation that the blocks this
// transaction freed could satisfy (fs/ext4/balloc.c), and errors=remount-ro after a failed
// commit (ext4_handle_error()). It sits beside the journal: every part that changes metadata
// asks it (maybe_commit) before it changes anything, and Super commits through it at fsync,
// sync, unmount and on its timer. All of it under the filesystem's exclusive lock.
#pragma once

#include <cerrno>
#include <cstdint>

#include "allocator.h"
#include "journal.h"
#include "meta_cache.h"

namespace biofs {

class CommitPolicy {
 public:
  CommitPolicy(Journal& journal, MetaCache& cache, FsAllocator& alloc) : journal_(journal), cache_(cache), alloc_(alloc) {}

  // Commits when the transaction nears the journal's capacity, or when an operation about to
  // allocate up to `need_blocks` might not find them while freed blocks wait for a commit
  // (ext4_should_retry_alloc's forced commit, done before the operation changes anything).
  // 0, or what a change gets now (refusal()).
  int maybe_commit(uint64_t need_blocks = 4);
  // Commits the running transaction (the freed blocks become allocatable). A failure stops
  // all writing until a remount, and says so once. 0 or -errno.
  int commit_locked();

  // Writing has stopped: 0, or the error that stopped it (a failed commit's, -EIO after a
  // shutdown). From then on the disk stays as of the last good commit.
  int failed() const { return failed_; }
  // What a change gets once writing has stopped: EIO after a shutdown (ext4_forced_shutdown()),
  // EROFS after a failed commit (errors=remount-ro).
  int refusal() const { return shut_down_ ? -EIO : -EROFS; }
  // EXT4_IOC_SHUTDOWN (Super::shutdown): no more writing, every change gets EIO.
  void shut_down() {
    shut_down_ = true;
    if (!failed_) failed_ = -EIO;
  }
  bool is_shut_down() const { return shut_down_; }

 private:
  Journal& journal_;
  MetaCache& cache_;
  FsAllocator& alloc_;
  int failed_ = 0;
  bool shut_down_ = false;
};

}  // namespace biofs
