// The emulated namespace's volatile write cache (`emu:PATH,vwc`). No kernel twin: this is the
// drive side of NVMe's Volatile Write Cache (NVMe base spec, "Volatile Write Cache" feature):
// a write completes once its data is in the controller's cache, the controller writes it to
// the media behind the host's back, a read returns the newest data whether it is still in the
// cache or already on the media, and Flush completes once everything the cache held is on
// non-volatile media. Here the media is the backing file and a writer thread writes the cache
// back in the order the writes were accepted.
//
// Why it exists: a filesystem whose writes go through FUSE without the kernel's write-back
// cache waits for every write(2) on the device. Without this cache each of those waits was a
// host O_DIRECT write, so `tar -x` took the host disk's write latency per write (docs/
// results.md, "The tar cliff"), while a drive that advertises a volatile cache answers from
// its DRAM. `vwc=through` keeps the old form: a write completes when the host has it.
//
// The cache's memory is one region of `capacity` bytes, mapped and touched once when the
// cache is made, and used as a ring in the order writes arrive, as a drive's write buffer is:
// a write takes the next free span after the newest one, and the writer frees spans from the
// oldest as it puts them on the media. Before, each write had a heap block of its own; a
// 128 KiB block is an mmap/munmap pair in glibc, so every cached byte paid a page fault on the
// submitting thread and every retired write a TLB shootdown of every CPU (issue 50: 1 MiB
// writes at a tenth of vwc=through's speed, at 6 ms of daemon CPU each).
//
// Rules (tests/nvme/emu_write_cache_test.cc):
//  - insert() copies the data; the caller's memory is free when it returns. It blocks while
//    the ring has no room for it (a full cache runs at the media's speed). A write larger than
//    the whole cache is not taken (insert() returns false): the caller writes it through,
//    after wait_written_back().
//  - The ring costs no allocation, page fault or system call per write: the daemon's page
//    faults per byte written do not grow with the bytes written (tests/fs/fuse_mount_test.cc).
//  - A span is reused only once its write is on the media and no read still copies from it.
//  - Overlapping writes reach the media in the order they were accepted: within a write-back
//    batch the later write's bytes replace the earlier one's before anything is written, and
//    batches run one after the other.
//  - overlapping() before a media read and apply() after it make the read see every write
//    accepted before it.
//  - Write-back starts at once on a backlog (a batch's worth of writes, or a quarter of the
//    cache), else once the oldest write has waited WRITEBACK_DELAY.
//  - wait_written_back() returns once every write accepted before it is on the media, and
//    writes batches back itself while no other batch is being written (as fsync does);
//    take_error() then tells the first write-back error since it was last asked (a volatile
//    cache reports a lost write at the next Flush, as a drive does).
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "lib/status.h"

namespace biofs {

// One accepted write: where it goes and its span of the cache's ring.
struct EmuCachedWrite {
  uint64_t off = 0, len = 0;  // on the device
  uint64_t seq = 0;           // acceptance order, from 1; 0 while its data is still copied in
  uint8_t* data = nullptr;    // in the ring, page-aligned so the writer can use O_DIRECT
  uint64_t span = 0;          // ring bytes it holds: len rounded up to a page, and any gap it skipped at the ring's end
  unsigned pins = 0;          // reads that will still copy from it
  bool on_media = false;
  std::chrono::steady_clock::time_point accepted_at;
};

struct EmuWriteCacheStats {
  uint64_t writes = 0;        // writes accepted into the cache
  uint64_t bytes = 0;         // bytes copied into the cache (one copy per byte written)
  uint64_t written_back = 0;  // writes the writer put on the media
  uint64_t batches = 0;       // write-back batches (one io_uring_enter each, at most 32 writes)
  uint64_t full_waits = 0;    // inserts that waited for room
  uint64_t too_large = 0;     // writes larger than the cache, refused by insert()
  uint64_t read_hits = 0;     // reads that overlapped cached data
  uint64_t waits = 0;         // wait_written_back() calls that found the cache dirty
  uint64_t waiter_batches = 0;  // batches written back by such a caller itself, not the writer
};

class EmuWriteCache {
 public:
  static constexpr unsigned WRITEBACK_BATCH = 32;  // writes in flight to the media at once
  static constexpr uint64_t SPAN_ALIGN = 4096;     // each write's span starts on a page
  // The writer starts on a write that has waited this long, sooner on a backlog (writer_loop).
  static constexpr std::chrono::microseconds WRITEBACK_DELAY{2000};
  static constexpr std::chrono::milliseconds IDLE_SLEEP{100};  // an empty cache this long: the writer sleeps

  // Sets up the ring's memory, the writer's io_uring and the writer into *out. `direct_fd` may
  // be -1 (no O_DIRECT); `off_align` is its offset and length alignment. Ok, or io_error with
  // one line naming `name` when the memory or the ring cannot be set up.
  static Status create(const std::string& name, int direct_fd, int buffered_fd, uint32_t off_align,
                       uint64_t capacity, std::unique_ptr<EmuWriteCache>* out);
  ~EmuWriteCache();  // writes everything back, then stops the writer
  EmuWriteCache(const EmuWriteCache&) = delete;
  EmuWriteCache& operator=(const EmuWriteCache&) = delete;

  // Accepts a write of `len` bytes at byte offset `off`, gathered from `vecs`; false (nothing
  // taken) when `len` exceeds the whole cache.
  bool insert(uint64_t off, const iovec* vecs, unsigned nr, uint64_t len);
  // Whether any write is cached: one relaxed load, so reads of a clean cache pay nothing more.
  bool dirty() const { return nr_entries_.load(std::memory_order_acquire) != 0; }

  // A read of [off, off + len) into `vecs`: the entries it overlaps, taken BEFORE the media
  // read (a write retired between a media read and a later lookup would be missed), then laid
  // over its result in acceptance order. The overlay pins their spans until it is destroyed.
  class Overlay {
   public:
    Overlay() = default;
    Overlay(Overlay&& o) noexcept : cache_(o.cache_), entries(std::move(o.entries)) { o.cache_ = nullptr; }
    Overlay& operator=(Overlay&&) = delete;
    ~Overlay();

   private:
    friend class EmuWriteCache;
    EmuWriteCache* cache_ = nullptr;

   public:
    std::vector<const EmuCachedWrite*> entries;  // oldest first
  };
  Overlay overlapping(uint64_t off, uint64_t len);
  static void apply(const Overlay& o, uint64_t off, uint64_t len, const iovec* vecs, unsigned nr);
  // Whether the overlay's writes cover all of [off, off + len): the media need not be read.
  static bool covers(const Overlay& o, uint64_t off, uint64_t len);

  // Waits until every write accepted so far is on the media.
  void wait_written_back();
  // 0, or the first write-back error (-errno) since the previous call.
  int take_error();

  // Tests: while held, the writer takes nothing from the cache (so its state can be seen).
  void hold_writeback(bool hold);
  // Tests: while held, the background writer takes nothing, but wait_written_back() still
  // writes back on its caller's thread.
  void hold_writer_thread(bool hold);
  // Tests: the next write-back batch fails with `neg_errno` and writes nothing (a media error).
  void fail_next_writeback(int neg_errno) { inject_err_.store(neg_errno, std::memory_order_relaxed); }

  uint64_t capacity() const { return capacity_; }
  uint64_t dirty_bytes() const;  // bytes accepted and not yet on the media
  uint64_t ring_bytes() const;   // ring bytes held: dirty spans, pinned ones, skipped gaps
  EmuWriteCacheStats stats() const;

 private:
  EmuWriteCache(const std::string& name, int direct_fd, int buffered_fd, uint32_t off_align, uint64_t capacity);
  Status init();  // create()'s work; the destructor undoes only what succeeded
  void writer_loop(std::stop_token stop);
  bool backlog_full() const;
  bool take_batch(std::vector<EmuCachedWrite*>* batch);
  void retire_batch(const std::vector<EmuCachedWrite*>& batch, int err);
  int write_batch(const std::vector<EmuCachedWrite*>& batch);
  uint64_t span_at_head(uint64_t len) const;  // the span a write of `len` takes now; 0: no room
  void release_spans();                       // frees the oldest spans that are written and unpinned
  void unpin(const std::vector<const EmuCachedWrite*>& entries);

  const std::string name_;
  const int direct_fd_, buffered_fd_;
  const uint32_t off_mask_;
  const uint64_t capacity_;  // the ring's size: the capacity asked for, rounded up to a page
  uint8_t* ring_ = nullptr;
  io_uring uring_{};

  mutable std::mutex mu_;
  std::condition_variable_any work_cv_;  // the writer: a backlog, a write into an idle cache, or stop
  std::condition_variable room_cv_;   // inserters and drainers: entries left the cache
  std::deque<EmuCachedWrite> spans_;  // ring order: every write that holds ring bytes
  std::deque<EmuCachedWrite*> fifo_;  // acceptance order: the writes not yet on the media
  std::multimap<uint64_t, EmuCachedWrite*> by_off_;  // the same writes, for read lookups
  uint64_t head_ = 0, tail_ = 0;  // ring positions, ever growing: [tail_, head_) is held
  uint64_t max_len_ = 0;      // the longest entry ever cached (bounds the overlap lookup)
  uint64_t dirty_bytes_ = 0;  // bytes accepted and not yet on the media
  uint64_t accepted_ = 0;     // sequence numbers: writes accepted so far
  uint64_t on_media_ = 0;     // the writes [1, on_media_] are all on the media
  int error_ = 0;             // first write-back error since take_error()
  bool held_ = false;
  bool writer_held_ = false;
  bool writer_asleep_ = false;  // the writer waits for a write, with no deadline
  bool writing_ = false;      // a batch is being written back (by the writer or a waiter)
  EmuWriteCacheStats stats_;
  std::atomic<uint64_t> nr_entries_{0};
  std::atomic<int> inject_err_{0};
  std::jthread writer_;  // last: stopped before the members it uses go
};

}  // namespace biofs
