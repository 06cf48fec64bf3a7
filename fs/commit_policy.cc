#include "commit_policy.h"

#include <cstdio>
#include <cstring>

namespace biofs {

int CommitPolicy::commit_locked() {
  if (failed_) return refusal();
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

int CommitPolicy::maybe_commit(uint64_t need_blocks) {
  if (failed_) return refusal();
  if (cache_.read_error()) return commit_locked();  // refuses, and says so once
  // Blocks freed by this transaction become allocatable only once it commits: a write right
  // after an rm on a full filesystem would get ENOSPC while df shows the space free.
  if (alloc_.pending_blocks() && alloc_.free_blocks() < need_blocks) return commit_locked();
  // Leave room for the largest single operation (a write of 1 MiB touches a few bitmap blocks,
  // an inode block, the extent tree).
  if (cache_.dirty_count() + alloc_.pending_bitmap_blocks() + 64 > journal_.capacity() / 2) return commit_locked();
  cache_.trim();
  return 0;
}

}  // namespace biofs
