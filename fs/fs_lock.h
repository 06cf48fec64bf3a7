// The filesystem's lock (FsInfo::lock): a std::shared_mutex whose waiting paths sleep
// through schedule() (blockcore/schedule.h), as a task that sleeps on the kernel's rw_semaphore
// does (rwsem_down_write_slowpath -> schedule()): the caller's plug is dispatched first. The
// holder may be waiting for I/O that sits in that plug: a truncate or hole punch drains the
// direct I/O in flight (inode_dio_wait) under the lock, and a FUSE ring thread keeps its plug
// across a batch of requests (daemon/README.md, "Plugging across a ring batch").
#pragma once

#include <shared_mutex>

#include "blockcore/schedule.h"

namespace biofs {

class FsLock {
 public:
  void lock() {
    if (!m_.try_lock()) schedule([this] { m_.lock(); });
  }
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

  void lock_shared() {
    if (!m_.try_lock_shared()) schedule([this] { m_.lock_shared(); });
  }
  bool try_lock_shared() { return m_.try_lock_shared(); }
  void unlock_shared() { m_.unlock_shared(); }

 private:
  std::shared_mutex m_;
};

}  // namespace biofs
