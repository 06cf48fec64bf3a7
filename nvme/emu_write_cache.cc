#include "emu_write_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "bounce.h"
#include "lib/background_thread.h"
#include "uring_util.h"

namespace biofs {

EmuWriteCache::EmuWriteCache(const std::string& name, int direct_fd, int buffered_fd, uint32_t off_align,
                             uint64_t capacity)
    : name_(name),
      direct_fd_(direct_fd),
      buffered_fd_(buffered_fd),
      off_mask_(direct_fd >= 0 ? off_align - 1 : 0),
      capacity_(std::max<uint64_t>((capacity + SPAN_ALIGN - 1) & ~(SPAN_ALIGN - 1), SPAN_ALIGN)) {}

Status EmuWriteCache::create(const std::string& name, int direct_fd, int buffered_fd, uint32_t off_align,
                             uint64_t capacity, std::unique_ptr<EmuWriteCache>* out) {
  out->reset();
  std::unique_ptr<EmuWriteCache> c(new EmuWriteCache(name, direct_fd, buffered_fd, off_align, capacity));
  if (Status s = c->init(); !s.ok()) return s;
  *out = std::move(c);
  return Status();
}

Status EmuWriteCache::init() {
  void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::io_error(name_ + " write cache: cannot map " + std::to_string(capacity_ >> 10) +
                            " KiB: " + std::strerror(errno));
  // Every page now, so no write faults one in later (huge pages where the system gives them).
  uint8_t* ring = static_cast<uint8_t*>(p);
  madvise(ring, capacity_, MADV_HUGEPAGE);
  if (madvise(ring, capacity_, MADV_POPULATE_WRITE) != 0)  // before Linux 5.14: touch each page
    for (uint64_t i = 0; i < capacity_; i += SPAN_ALIGN) ring[i] = 0;
  io_uring_params params{};
  params.flags = IORING_SETUP_CLAMP;
  if (std::string err = uring_init(&uring_, WRITEBACK_BATCH, &params, 0, name_ + " write cache"); !err.empty()) {
    munmap(ring, capacity_);
    return Status::io_error(err);
  }
  ring_ = ring;  // set up: from here the destructor writes back and tears down
  // The emulated device's thread, "other" in biofs-compare's roles.
  writer_ = start_background_thread("biofs-wcache", [this](std::stop_token stop) { writer_loop(stop); });
  return Status();
}

EmuWriteCache::~EmuWriteCache() {
  if (!ring_) return;  // init() failed: it undid its own steps
  hold_writeback(false);
  wait_written_back();
  stop_background_thread(writer_);
  io_uring_queue_exit(&uring_);
  munmap(ring_, capacity_);
}

static uint64_t span_bytes(uint64_t len) { return (len + EmuWriteCache::SPAN_ALIGN - 1) & ~(EmuWriteCache::SPAN_ALIGN - 1); }

uint64_t EmuWriteCache::span_at_head(uint64_t len) const {
  const uint64_t need = span_bytes(len);
  const uint64_t pos = head_ % capacity_;
  const uint64_t span = pos + need > capacity_ ? need + (capacity_ - pos) : need;  // skips the ring's end
  return head_ - tail_ + span <= capacity_ ? span : 0;
}

bool EmuWriteCache::insert(uint64_t off, const iovec* vecs, unsigned nr, uint64_t len) {
  std::unique_lock lk(mu_);
  if (len > capacity_) {
    stats_.too_large++;
    return false;
  }
  uint64_t span = span_at_head(len);
  if (!span) {
    stats_.full_waits++;
    room_cv_.wait(lk, [&] { return (span = span_at_head(len)) != 0; });
  }
  EmuCachedWrite& e = spans_.emplace_back();
  e.off = off;
  e.len = len;
  e.span = span;
  head_ += span;
  e.data = ring_ + (head_ - span_bytes(len)) % capacity_;  // after any gap skipped at the ring's end
  lk.unlock();
  copy_from_iovecs(e.data, vecs, nr);  // the span is this write's alone until it is published
  lk.lock();
  e.seq = ++accepted_;
  if (len > max_len_) max_len_ = len;
  dirty_bytes_ += len;
  fifo_.push_back(&e);
  by_off_.emplace(off, &e);
  stats_.writes++;
  stats_.bytes += len;
  nr_entries_.fetch_add(1, std::memory_order_release);
  e.accepted_at = std::chrono::steady_clock::now();
  const bool wake = writer_asleep_ || backlog_full();
  lk.unlock();
  if (wake) work_cv_.notify_one();
  return true;
}

EmuWriteCache::Overlay EmuWriteCache::overlapping(uint64_t off, uint64_t len) {
  Overlay o;
  std::lock_guard lk(mu_);
  const uint64_t from = off > max_len_ ? off - max_len_ : 0;
  for (auto it = by_off_.lower_bound(from); it != by_off_.end() && it->first < off + len; ++it) {
    EmuCachedWrite& e = *it->second;
    if (e.off + e.len > off) {
      e.pins++;
      o.entries.push_back(&e);
    }
  }
  if (!o.entries.empty()) {
    o.cache_ = this;
    stats_.read_hits++;
    std::sort(o.entries.begin(), o.entries.end(), [](const auto* a, const auto* b) { return a->seq < b->seq; });
  }
  return o;
}

EmuWriteCache::Overlay::~Overlay() {
  if (cache_) cache_->unpin(entries);
}

void EmuWriteCache::unpin(const std::vector<const EmuCachedWrite*>& entries) {
  {
    std::lock_guard lk(mu_);
    for (const EmuCachedWrite* e : entries) const_cast<EmuCachedWrite*>(e)->pins--;
    release_spans();
  }
  room_cv_.notify_all();
}

void EmuWriteCache::release_spans() {
  while (!spans_.empty() && spans_.front().on_media && !spans_.front().pins) {
    tail_ += spans_.front().span;
    spans_.pop_front();
  }
  if (spans_.empty()) head_ = tail_ = 0;  // an empty ring starts again at its beginning
}

void EmuWriteCache::apply(const Overlay& o, uint64_t off, uint64_t len, const iovec* vecs, unsigned nr) {
  for (const EmuCachedWrite* e : o.entries) {  // oldest first: the newest write wins
    const uint64_t lo = std::max(off, e->off), hi = std::min(off + len, e->off + e->len);
    // Copy [lo, hi) of the device into the read's vecs at position lo - off.
    uint64_t pos = 0;
    for (unsigned i = 0; i < nr && lo < hi; i++) {
      const uint64_t vlo = pos, vhi = pos + vecs[i].iov_len;
      pos = vhi;
      const uint64_t a = std::max(vlo, lo - off), b = std::min(vhi, hi - off);
      if (a >= b) continue;
      std::memcpy(static_cast<uint8_t*>(vecs[i].iov_base) + (a - vlo), e->data + (off + a - e->off), b - a);
    }
  }
}

bool EmuWriteCache::covers(const Overlay& o, uint64_t off, uint64_t len) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const EmuCachedWrite* e : o.entries) spans.emplace_back(e->off, e->off + e->len);
  std::sort(spans.begin(), spans.end());
  uint64_t reached = off;
  for (auto [lo, hi] : spans) {
    if (lo > reached) break;
    reached = std::max(reached, hi);
  }
  return reached >= off + len;
}

// A waiter that finds no batch being written writes the next ones back itself, as fsync writes
// a file's dirty pages from the caller's own context (filemap_write_and_wait_range) rather than
// waking the flusher and sleeping: a flush then costs no hand-off to the writer and back.
void EmuWriteCache::wait_written_back() {
  std::unique_lock lk(mu_);
  const uint64_t target = accepted_;
  if (on_media_ >= target) return;
  stats_.waits++;
  std::vector<EmuCachedWrite*> batch;
  while (on_media_ < target) {
    if (!take_batch(&batch)) {
      room_cv_.wait(lk);
      continue;
    }
    stats_.waiter_batches++;
    lk.unlock();
    const int err = write_batch(batch);
    lk.lock();
    retire_batch(batch, err);
  }
}

int EmuWriteCache::take_error() {
  std::lock_guard lk(mu_);
  const int err = error_;
  error_ = 0;
  return err;
}

void EmuWriteCache::hold_writeback(bool hold) {
  {
    std::lock_guard lk(mu_);
    held_ = hold;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();  // waiters may write back themselves now
}

void EmuWriteCache::hold_writer_thread(bool hold) {
  {
    std::lock_guard lk(mu_);
    writer_held_ = hold;
  }
  work_cv_.notify_all();
}

uint64_t EmuWriteCache::dirty_bytes() const {
  std::lock_guard lk(mu_);
  return dirty_bytes_;
}

uint64_t EmuWriteCache::ring_bytes() const {
  std::lock_guard lk(mu_);
  return head_ - tail_;
}

EmuWriteCacheStats EmuWriteCache::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

// Takes up to WRITEBACK_BATCH writes from the head of the FIFO for the caller to write back,
// unless the writer is held, the FIFO is empty or another batch is being written (batches run
// one after the other). Under mu_.
bool EmuWriteCache::take_batch(std::vector<EmuCachedWrite*>* batch) {
  batch->clear();
  if (held_ || writing_ || fifo_.empty()) return false;
  for (EmuCachedWrite* e : fifo_) {
    if (batch->size() == WRITEBACK_BATCH) break;
    batch->push_back(e);
  }
  writing_ = true;
  return true;
}

// The batch is on the media (or failed with err): its writes leave the FIFO and the lookups,
// their spans are freed where no read pins them, and whoever waits is told. Under mu_.
void EmuWriteCache::retire_batch(const std::vector<EmuCachedWrite*>& batch, int err) {
  for (EmuCachedWrite* e : batch) {
    fifo_.pop_front();  // the batch is the FIFO's head
    auto [lo, hi] = by_off_.equal_range(e->off);
    for (auto it = lo; it != hi; ++it)
      if (it->second == e) {
        by_off_.erase(it);
        break;
      }
    e->on_media = true;
    dirty_bytes_ -= e->len;
  }
  on_media_ = batch.back()->seq;
  stats_.written_back += batch.size();
  stats_.batches++;
  if (err && !error_) error_ = err;
  nr_entries_.fetch_sub(batch.size(), std::memory_order_release);
  release_spans();
  writing_ = false;
  room_cv_.notify_all();
  if (!fifo_.empty()) work_cv_.notify_one();
}

bool EmuWriteCache::backlog_full() const {
  return fifo_.size() >= WRITEBACK_BATCH || dirty_bytes_ >= capacity_ / 4;
}

// Writes the cache back in batches, each as one image (a later write's bytes replace an earlier
// one's; adjacent writes become one vectored write, as a drive's cache coalesces). It starts at
// once when the cache holds a batch's worth or a quarter of its bytes, else when the oldest
// write has waited WRITEBACK_DELAY, so a flush that follows a write within that time writes it
// back on its own thread (wait_written_back) and wakes nobody. While writes keep coming the
// writer wakes once a delay to look; after IDLE_SLEEP with an empty cache it sleeps until a
// write arrives.
void EmuWriteCache::writer_loop(std::stop_token stop) {
  using clock = std::chrono::steady_clock;
  std::vector<EmuCachedWrite*> batch;
  std::unique_lock lk(mu_);
  auto busy_at = clock::now();  // when the cache was last seen holding anything
  while (!stop.stop_requested()) {
    if (fifo_.empty() && clock::now() - busy_at > IDLE_SLEEP) {
      writer_asleep_ = true;
      work_cv_.wait(lk, stop, [&] { return !fifo_.empty(); });
      writer_asleep_ = false;
      continue;
    }
    const auto due = (fifo_.empty() ? clock::now() : fifo_.front()->accepted_at) + WRITEBACK_DELAY;
    work_cv_.wait_until(lk, stop, due, [&] { return !writer_held_ && backlog_full(); });
    if (fifo_.empty()) continue;
    busy_at = clock::now();
    if (!backlog_full() && busy_at < fifo_.front()->accepted_at + WRITEBACK_DELAY) continue;  // a newer head
    if (writer_held_ || !take_batch(&batch)) {  // held, or a waiter is writing: its retire wakes us
      work_cv_.wait(lk, stop, [&] { return !held_ && !writer_held_ && !writing_; });
      continue;
    }
    lk.unlock();
    const int err = write_batch(batch);
    lk.lock();
    retire_batch(batch, err);
  }  // stop asked: the destructor wrote everything back first
}

namespace {

// The newest bytes of a batch: disjoint pieces by device offset, each pointing into the
// write that last wrote it.
struct Piece {
  uint64_t len;
  const uint8_t* data;
};
using PieceMap = std::map<uint64_t, Piece>;

void put_piece(PieceMap* m, uint64_t off, uint64_t len, const uint8_t* data) {
  const uint64_t end = off + len;
  auto it = m->lower_bound(off);
  if (it != m->begin()) {  // a piece that starts before and reaches into [off, end)
    auto prev = std::prev(it);
    const uint64_t pend = prev->first + prev->second.len;
    if (pend > off) {
      prev->second.len = off - prev->first;
      if (pend > end) m->emplace(end, Piece{pend - end, prev->second.data + (end - prev->first)});
    }
  }
  while (it != m->end() && it->first < end) {  // pieces that start inside [off, end)
    const uint64_t pend = it->first + it->second.len;
    if (pend > end) m->emplace(end, Piece{pend - end, it->second.data + (end - it->first)});
    it = m->erase(it);
  }
  (*m)[off] = Piece{len, data};
}

}  // namespace

// One vectored write per run of adjacent pieces, all at once through the writer's ring; one
// that the host refuses for now (io-wq could not start, -EAGAIN, -EINTR) or that comes back
// short is done again with plain pwrite calls. 0, or the first hard error.
int EmuWriteCache::write_batch(const std::vector<EmuCachedWrite*>& batch) {
  if (int err = inject_err_.exchange(0, std::memory_order_relaxed)) return err;
  PieceMap pieces;
  for (const EmuCachedWrite* e : batch) put_piece(&pieces, e->off, e->len, e->data);
  struct Run {
    uint64_t off = 0, len = 0;
    std::vector<iovec> vecs;
  };
  std::vector<Run> runs;
  for (const auto& [off, p] : pieces) {
    if (runs.empty() || runs.back().off + runs.back().len != off || runs.back().vecs.size() == IOV_MAX)
      runs.push_back(Run{off, 0, {}});
    runs.back().len += p.len;
    runs.back().vecs.push_back(iovec{const_cast<uint8_t*>(p.data), p.len});
  }
  std::vector<int> res(runs.size(), -EAGAIN);
  for (size_t i = 0; i < runs.size(); i++) {
    const Run& r = runs[i];
    bool direct = direct_fd_ >= 0 && !((r.off | r.len) & off_mask_);
    for (const iovec& v : r.vecs) direct = direct && !((reinterpret_cast<uintptr_t>(v.iov_base) | v.iov_len) & off_mask_);
    io_uring_sqe* sqe = io_uring_get_sqe(&uring_);
    while (!sqe) {
      io_uring_submit(&uring_);
      sqe = io_uring_get_sqe(&uring_);
    }
    io_uring_prep_writev(sqe, direct ? direct_fd_ : buffered_fd_, r.vecs.data(), unsigned(r.vecs.size()), r.off);
    io_uring_sqe_set_data64(sqe, i);
  }
  unsigned left = unsigned(runs.size());
  int ret = io_uring_submit_and_wait(&uring_, left);
  while (left && (ret >= 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY)) {
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&uring_, head, cqe) {
      res[cqe->user_data] = cqe->res;
      seen++;
    }
    io_uring_cq_advance(&uring_, seen);
    left -= seen;
    if (left) ret = io_uring_submit_and_wait(&uring_, left);
  }
  int first_err = 0;
  for (size_t i = 0; i < runs.size(); i++) {
    const Run& r = runs[i];
    if (res[i] == int64_t(r.len)) continue;
    // Again, whole, with plain system calls through the page cache (any alignment).
    uint64_t pos = r.off;
    for (const iovec& v : r.vecs) {
      const uint8_t* data = static_cast<const uint8_t*>(v.iov_base);
      uint64_t done = 0;
      for (int tries = 0; done < v.iov_len;) {
        const ssize_t n = pwrite(buffered_fd_, data + done, v.iov_len - done, off_t(pos + done));
        if (n > 0) {
          done += uint64_t(n);
          continue;
        }
        const int err = n == 0 ? EIO : errno;
        if ((err == EINTR || err == EAGAIN || err == ENOMEM) && tries++ < 1000) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        if (!first_err) first_err = -err;
        break;
      }
      pos += v.iov_len;
    }
  }
  return first_err;
}

}  // namespace biofs
