// blktrace's record writing (kernel/trace/blktrace.c, v6.18: __blk_add_trace, trace_note_tsk,
// blk_trace_setup/remove), with per-thread rings and a writer thread in place of relay's
// per-CPU sub-buffers and the blktrace tool's reader threads. See blk_trace.h.
#include "blk_trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "stage_clock.h"

namespace biofs {

namespace {

inline constexpr unsigned kPduMax = 16;  // the largest payload: a task's comm

struct alignas(64) TraceSlot {
  blk_io_trace t;
  uint8_t pdu[kPduMax];
};
static_assert(sizeof(TraceSlot) == 64);

// One thread's records for one trace: that thread writes, the writer thread reads.
struct TraceRing {
  TraceRing(unsigned records, unsigned cpu_slot, uint32_t tid)
      : slots(new TraceSlot[records]), mask(records - 1), cpu(cpu_slot), pid(tid) {}
  std::unique_ptr<TraceSlot[]> slots;
  const uint64_t mask;
  const unsigned cpu;  // this ring's file: NAME.blktrace.<cpu>
  const uint32_t pid;
  alignas(64) std::atomic<uint64_t> head{0};  // next slot the thread fills
  uint32_t sequence = 0;                      // the thread's: counts dropped records too
  std::atomic<uint64_t> dropped{0};
  alignas(64) std::atomic<uint64_t> tail{0};  // next slot the writer reads
};

uint32_t current_tid() {
  static thread_local const uint32_t tid = uint32_t(syscall(SYS_gettid));
  return tid;
}

std::atomic<uint64_t> next_trace_id{1};

// The category bits __blk_add_trace() takes from the operation and its flags.
uint32_t blk_trace_category(blk_opf_t opf) {
  const req_op op = bio_op_of(opf);
  uint32_t tc = op_is_write(op) ? BLK_TC_WRITE : BLK_TC_READ;
  if (opf & REQ_SYNC) tc |= BLK_TC_SYNC;
  if (opf & REQ_META) tc |= BLK_TC_META;
  if (opf & REQ_PREFLUSH) tc |= BLK_TC_FLUSH;
  if (opf & REQ_FUA) tc |= BLK_TC_FUA;
  if (op == REQ_OP_DISCARD) tc |= BLK_TC_DISCARD;
  if (op == REQ_OP_FLUSH) tc |= BLK_TC_FLUSH;
  return BLK_TC_ACT(tc);
}

}  // namespace

class BlkTrace {
 public:
  explicit BlkTrace(const BlkTraceConfig& cfg) : cfg_(cfg), id_(next_trace_id.fetch_add(1)) {}
  ~BlkTrace() { stop(); }

  Status start() {
    // One file must open now, so that a wrong directory is an error at setup, not lost records.
    std::lock_guard g(lock_);
    if (Status s = open_file(0); !s.ok()) return s;
    writer_ = std::jthread([this](std::stop_token st) { write_loop(st); });
    return {};
  }

  // Called by the tracepoints: this thread's ring, made on its first record.
  TraceRing* ring() {
    struct Cached {
      uint64_t id;
      TraceRing* ring;
    };
    static thread_local Cached cache[4];
    static thread_local unsigned next_victim;
    for (const Cached& c : cache)
      if (c.id == id_) return c.ring;
    TraceRing* r = add_ring();
    cache[next_victim++ % 4] = {id_, r};
    return r;
  }

  // __blk_add_trace(): one record, or a dropped one if the ring is full.
  void add(uint64_t sector, uint32_t bytes, uint32_t what, int error, const void* pdu, unsigned pdu_len) {
    TraceRing* r = ring();
    if (!r) return;
    const uint64_t head = r->head.load(std::memory_order_relaxed);
    const uint32_t seq = r->sequence++;
    if (head - r->tail.load(std::memory_order_acquire) > r->mask) {
      r->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    TraceSlot& s = r->slots[head & r->mask];
    s.t.magic = BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION;
    s.t.sequence = seq;
    s.t.time = stage_now_ns();
    s.t.sector = sector;
    s.t.bytes = bytes;
    s.t.action = what;
    s.t.pid = r->pid;
    s.t.device = cfg_.device;
    s.t.cpu = r->cpu;
    s.t.error = uint16_t(error);
    s.t.pdu_len = uint16_t(pdu_len);
    if (pdu_len) memcpy(s.pdu, pdu, pdu_len);
    r->head.store(head + 1, std::memory_order_release);
    // Every half ring, the writer is woken rather than left to its timer, for a thread that
    // makes more than a ring's worth of records per drain interval (at in-process rates of
    // millions of I/Os a second it still falls behind: docs/tracing.md, "Cost").
    if (((head + 1) & (r->mask >> 1)) == 0 && cfg_.kick_at_half) [[unlikely]]
      kick_writer();
  }

  void kick_writer() {
    {
      std::lock_guard g(wake_lock_);
      kicked_ = true;
    }
    wake_.notify_one();
  }

  // Stops the writer after a last pass; closes the files.
  void stop() {
    if (writer_.joinable()) {
      writer_.request_stop();
      wake_.notify_all();
      writer_.join();
    }
    std::lock_guard g(lock_);
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    fds_.clear();
  }

  BlkTraceStats stats() {
    std::lock_guard g(lock_);
    BlkTraceStats st;
    st.records = written_;
    for (auto& r : rings_) st.dropped += r->dropped.load(std::memory_order_relaxed);
    st.files = unsigned(rings_.size() > 0 ? rings_.size() : 1);
    return st;
  }

 private:
  Status open_file(unsigned cpu) {
    const std::string path = cfg_.dir + "/" + cfg_.name + ".blktrace." + std::to_string(cpu);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::io_error("blktrace: cannot create " + path + ": " + strerror(errno));
    if (fds_.size() <= cpu) fds_.resize(cpu + 1, -1);
    fds_[cpu] = fd;
    return {};
  }

  TraceRing* add_ring() {
    std::lock_guard g(lock_);
    const unsigned cpu = unsigned(rings_.size());
    if (cpu >= fds_.size() || fds_[cpu] < 0) {
      if (!open_file(cpu).ok()) return nullptr;
    }
    rings_.push_back(std::make_unique<TraceRing>(cfg_.ring_records, cpu, current_tid()));
    TraceRing* r = rings_.back().get();
    // trace_note_tsk(): the thread's name, which blkparse prints beside its pid.
    char comm[kPduMax] = {};
    pthread_getname_np(pthread_self(), comm, sizeof comm);
    ring_count_.store(rings_.size(), std::memory_order_release);
    note_process(r, comm);
    return r;
  }

  // A BLK_TN_PROCESS note, written straight into the ring (which is empty: it was just made).
  void note_process(TraceRing* r, const char* comm) {
    TraceSlot& s = r->slots[0];
    memset(&s, 0, sizeof s);
    s.t.magic = BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION;
    s.t.sequence = r->sequence++;
    s.t.time = stage_now_ns();
    s.t.action = BLK_TN_PROCESS;
    s.t.pid = r->pid;
    s.t.device = cfg_.device;
    s.t.cpu = r->cpu;
    s.t.pdu_len = kPduMax;
    memcpy(s.pdu, comm, kPduMax);
    r->head.store(1, std::memory_order_release);
  }

  // The writer: every few milliseconds, each ring's new records go to its file.
  void write_loop(std::stop_token st) {
    std::vector<uint8_t> out;
    for (;;) {
      {
        std::unique_lock g(wake_lock_);
        wake_.wait_for(g, std::chrono::milliseconds(cfg_.drain_ms), [&] { return st.stop_requested() || kicked_; });
        kicked_ = false;
      }
      const bool stopping = st.stop_requested();
      drain(out);
      if (stopping) return;
    }
  }

  void drain(std::vector<uint8_t>& out) {
    const size_t n = ring_count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
      TraceRing* r;
      int fd;
      {
        std::lock_guard g(lock_);
        r = rings_[i].get();
        fd = fds_[r->cpu];
      }
      const uint64_t head = r->head.load(std::memory_order_acquire);
      const uint64_t first = r->tail.load(std::memory_order_relaxed);
      if (head == first) continue;
      uint64_t tail = first;
      out.resize(size_t(head - first) * sizeof(TraceSlot));
      size_t len = 0;
      for (; tail != head; tail++) {
        const TraceSlot& s = r->slots[tail & r->mask];
        const size_t n = sizeof(blk_io_trace) + s.t.pdu_len;
        memcpy(out.data() + len, &s, n);
        len += n;
      }
      out.resize(len);
      r->tail.store(tail, std::memory_order_release);
      size_t off = 0;
      while (off < out.size()) {
        const ssize_t w = ::write(fd, out.data() + off, out.size() - off);
        if (w <= 0) break;  // a full disk: what is left of this pass is lost, like a dropped record
        off += size_t(w);
      }
      std::lock_guard g(lock_);
      written_ += head - first;
    }
  }

  const BlkTraceConfig cfg_;
  const uint64_t id_;
  std::mutex lock_;  // rings_, fds_, written_
  std::vector<std::unique_ptr<TraceRing>> rings_;
  std::atomic<size_t> ring_count_{0};
  std::vector<int> fds_;
  uint64_t written_ = 0;
  std::mutex wake_lock_;
  std::condition_variable wake_;
  bool kicked_ = false;  // under wake_lock_: a ring is half full
  std::jthread writer_;  // last: stopped first
};

void BlkTraceDeleter::operator()(BlkTrace* bt) const { delete bt; }

Status blk_trace_setup(RequestQueue* q, const BlkTraceConfig& cfg) {
  if (q->blk_trace()) return Status::busy("blktrace: the queue is already traced");
  if (cfg.ring_records < 2 || (cfg.ring_records & (cfg.ring_records - 1)))
    return Status::invalid_argument("blktrace: ring_records must be a power of two (got " +
                                    std::to_string(cfg.ring_records) + ")");
  std::unique_ptr<BlkTrace, BlkTraceDeleter> bt(new BlkTrace(cfg));
  if (Status s = bt->start(); !s.ok()) return s;
  q->blk_trace_.store(bt.get(), std::memory_order_release);
  q->traces_.push_back(std::move(bt));
  trace_gate_blktrace(+1);
  return {};
}

bool blk_trace_remove(RequestQueue* q, BlkTraceStats* stats) {
  BlkTrace* bt = q->blk_trace_.exchange(nullptr, std::memory_order_acq_rel);
  if (!bt) return false;
  trace_gate_blktrace(-1);
  bt->stop();
  if (stats) *stats = bt->stats();
  return true;
}

namespace {

// __blk_add_trace()'s callers: blk_add_trace_bio, blk_add_trace_split, blk_add_trace_rq,
// blk_add_trace_plug, blk_add_trace_unplug.
void blk_add_trace_bio(BlkTrace* bt, const Bio* bio, uint32_t what) {
  bt->add(bio->bi_iter.bi_sector, bio->bi_iter.bi_size, what | blk_trace_category(bio->bi_opf),
          blk_status_to_errno(bio->bi_status), nullptr, 0);
}

void blk_add_trace_split(BlkTrace* bt, const Bio* bio, sector_t new_sector) {
  const uint64_t pdu = __builtin_bswap64(new_sector);  // cpu_to_be64
  bt->add(bio->bi_iter.bi_sector, bio->bi_iter.bi_size, BLK_TA_SPLIT | blk_trace_category(bio->bi_opf),
          blk_status_to_errno(bio->bi_status), &pdu, sizeof pdu);
}

// A request's records carry BLK_TC_FS (a filesystem request, not a passthrough one): btt
// follows only those from issue to completion.
void blk_add_trace_rq(BlkTrace* bt, const Request* rq, uint32_t what, int error) {
  bt->add(blk_rq_pos(rq), blk_rq_bytes(rq), what | blk_trace_category(rq->cmd_flags) | BLK_TC_ACT(BLK_TC_FS),
          error, nullptr, 0);
}

void blk_add_trace_plug(BlkTrace* bt) { bt->add(0, 0, BLK_TA_PLUG, 0, nullptr, 0); }

void blk_add_trace_unplug(BlkTrace* bt, unsigned depth, bool explicit_unplug) {
  const uint64_t pdu = __builtin_bswap64(uint64_t(depth));
  bt->add(0, 0, explicit_unplug ? BLK_TA_UNPLUG_IO : BLK_TA_UNPLUG_TIMER, 0, &pdu, sizeof pdu);
}

}  // namespace

namespace tracepoint {

void block_bio_queue(RequestQueue* q, const Bio* bio) {
  BIOFS_PROBE(block, block_bio_queue, q->devt(), bio->bi_iter.bi_sector, bio_sectors(bio), bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_bio(bt, bio, BLK_TA_QUEUE);
}
void block_split(RequestQueue* q, const Bio* bio, sector_t new_sector) {
  BIOFS_PROBE(block, block_split, q->devt(), bio->bi_iter.bi_sector, new_sector, bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_split(bt, bio, new_sector);
}
void block_bio_backmerge(RequestQueue* q, const Bio* bio) {
  BIOFS_PROBE(block, block_bio_backmerge, q->devt(), bio->bi_iter.bi_sector, bio_sectors(bio), bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_bio(bt, bio, BLK_TA_BACKMERGE);
}
void block_bio_frontmerge(RequestQueue* q, const Bio* bio) {
  BIOFS_PROBE(block, block_bio_frontmerge, q->devt(), bio->bi_iter.bi_sector, bio_sectors(bio), bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_bio(bt, bio, BLK_TA_FRONTMERGE);
}
void block_getrq(RequestQueue* q, const Bio* bio) {
  BIOFS_PROBE(block, block_getrq, q->devt(), bio->bi_iter.bi_sector, bio_sectors(bio), bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_bio(bt, bio, BLK_TA_GETRQ);
}
void block_sleeprq(RequestQueue* q, const Bio* bio) {
  BIOFS_PROBE(block, block_sleeprq, q->devt(), bio->bi_iter.bi_sector, bio_sectors(bio), bio->bi_opf);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_bio(bt, bio, BLK_TA_SLEEPRQ);
}
void block_plug(RequestQueue* q) {
  BIOFS_PROBE(block, block_plug, q->devt());
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_plug(bt);
}
void block_unplug(RequestQueue* q, unsigned depth, bool explicit_unplug) {
  BIOFS_PROBE(block, block_unplug, depth, explicit_unplug, q->devt());
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_unplug(bt, depth, explicit_unplug);
}
// The request probes' last argument is the request's address: the key that pairs an issue
// with its completion (tools/bpf/biosnoop.bt, biolatency.bt).
void block_rq_issue_list(Request* first) {
  for (Request* rq = first; rq; rq = rq->rq_next) {
    RequestQueue* q = rq->q;
    BIOFS_PROBE(block, block_rq_issue, q->devt(), blk_rq_pos(rq), blk_rq_sectors(rq), blk_rq_bytes(rq), rq->cmd_flags, rq);
    if (BlkTrace* bt = q->blk_trace()) blk_add_trace_rq(bt, rq, BLK_TA_ISSUE, 0);
  }
}
void block_rq_complete(Request* rq, blk_status_t status) {
  const int error = blk_status_to_errno(status);
  RequestQueue* q = rq->q;
  BIOFS_PROBE(block, block_rq_complete, q->devt(), blk_rq_pos(rq), blk_rq_sectors(rq), error, rq->cmd_flags, rq);
  if (BlkTrace* bt = q->blk_trace()) blk_add_trace_rq(bt, rq, BLK_TA_COMPLETE, error);
}

}  // namespace tracepoint

}  // namespace biofs
