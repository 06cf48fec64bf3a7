// Which files the kernel may hold pages of while a direct write is in flight. Kernel twin:
// the invalidation after a direct write, kiocb_invalidate_post_direct_write() in
// generic_file_direct_write() and iomap_dio_complete() (mm/filemap.c, fs/iomap/direct-io.c,
// Linux 6.18), which drops pages a buffered reader brought in while the write was in flight.
// FUSE's asynchronous direct write (fuse_direct_IO, fs/fuse/file.c) invalidates only when it
// sends the WRITE, not when it ends, so a reader racing it keeps the old data in its pages
// (generic/451); the daemon, which sees the write end, drops them for it (data_requests.cc).
//
// Handles opened through the page cache (not FOPEN_DIRECT_IO) are counted by inode, hashed
// into slots: a collision only drops pages that did not need it. A write takes a ticket when it
// arrives; at its end the pages may be stale if such a handle is open, or one opened or closed
// since the ticket. Loads only on the write's path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace biofs {

class CachedOpens {
 public:
  void opened(uint64_t ino) { change(ino, +1); }
  void released(uint64_t ino) { change(ino, -1); }

  // At a direct write's arrival; never 0.
  uint32_t ticket(uint64_t ino) const { return (slot(ino).changes.load() << 1) | 1; }
  // At its end: whether a cached handle was open at any time since the ticket.
  bool may_be_stale(uint64_t ino, uint32_t ticket) const {
    const Slot& s = slot(ino);
    return s.open.load() != 0 || this->ticket(ino) != ticket;
  }

 private:
  struct Slot {
    std::atomic<uint32_t> open{0};
    std::atomic<uint32_t> changes{0};
  };
  static constexpr size_t SLOTS = 1024;
  Slot& slot(uint64_t ino) { return slots_[ino % SLOTS]; }
  const Slot& slot(uint64_t ino) const { return slots_[ino % SLOTS]; }
  void change(uint64_t ino, int by) {
    Slot& s = slot(ino);
    s.open.fetch_add(uint32_t(by));
    s.changes.fetch_add(1);
  }
  std::array<Slot, SLOTS> slots_;
};

}  // namespace biofs
