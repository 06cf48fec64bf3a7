// Counterpart of block/blk-mq.c, block/blk-mq-tag.c and block/blk-core.c (plugging): hardware
// queues with preallocated tagged requests, the driver interface (struct blk_mq_ops), bio
// submission with split checks and batched tag allocation, plugging, and batched completion.
//
// Thread-to-hardware-queue map: a submitting thread is mapped by the CPU it first submitted
// from (sched_getcpu() once, then cached for the thread): hctx = cpu % nr_hw_queues. Threads are
// pinned in the daemon and the benchmarks, so this is the kernel's CPU map; an unpinned thread
// keeps the queue of the CPU it started on. REQ_POLLED bios go to the poll queues, one per
// polling thread in turn (blk_poll.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bio_set.h"
#include "blk_merge.h"
#include "queue_limits.h"
#include "request.h"
#include "toggles.h"

namespace biofs {

struct SbitmapQueue;
struct IoCompBatch;

// v6.18 include/linux/blkdev.h / block/blk-mq.c: a plug holds BLK_MAX_REQUEST_COUNT requests
// (twice that once it has seen several queues); a plug whose oldest request is
// BLK_PLUG_FLUSH_SIZE bytes or more is flushed when the next request joins (blk_add_rq_to_plug).
inline constexpr unsigned BLK_MAX_REQUEST_COUNT = 32;         // requests a plug holds
inline constexpr uint32_t BLK_PLUG_FLUSH_SIZE = 128 * 1024;   // bytes that flush a plug early
inline constexpr unsigned TAG_COMP_BATCH = 32;                // tags freed per batch

// struct blk_mq_ops: what a driver implements. One virtual call per plug flush (queue_rqs)
// and per completion batch, not per bio.
class BlkMqOps {
 public:
  virtual ~BlkMqOps() = default;
  // Queues one request; `last` says no more follow in this dispatch (ring the doorbell).
  // BLK_STS_RESOURCE/AGAIN: the device is busy, the request is retried later.
  virtual blk_status_t queue_rq(BlkMqHwCtx* hctx, Request* rq, bool last) = 0;
  // Queues a list of requests (possibly for several hardware queues of this queue). Requests
  // the driver could not take are left in `rqs`; the core then issues them one by one.
  virtual void queue_rqs(RqList* rqs);
  // Rings the doorbell for requests queued with last == false.
  virtual void commit_rqs(BlkMqHwCtx*) {}
  // Reaps completions on a polled queue into `iob`; returns how many were found.
  virtual int poll(BlkMqHwCtx*, IoCompBatch*) { return 0; }
  // Sleeps until a poll queue has a completion to reap (or a bounded while passes): what stands
  // in for the kernel's spinning in blk_mq_poll() on machines with fewer CPUs than pollers.
  virtual void poll_wait(BlkMqHwCtx*) {}
  virtual int init_hctx(BlkMqHwCtx*, unsigned /*hctx_idx*/) { return 0; }
  // The completion cover (blk_cover.h): a descriptor that polls readable while a default queue
  // has completions to reap (-1: none, the queue cannot be covered), and the driver's completion
  // thread standing down while a thread covers the queue (true) or taking over again (false).
  virtual int completion_fd(BlkMqHwCtx*) { return -1; }
  virtual void set_covered(BlkMqHwCtx*, bool) {}
};

// struct blk_mq_tags: a tag space and its preallocated requests.
struct BlkMqTags {
  BlkMqTags() = default;  // empty until init()
  BlkMqTags(const BlkMqTags&) = delete;
  BlkMqTags& operator=(const BlkMqTags&) = delete;
  ~BlkMqTags();
  // blk_mq_init_tags() + blk_mq_alloc_rqs(): the tag map and nr_tags requests of rq_size bytes.
  // 0, or -ENOMEM (or the tag map's -EINVAL), as the kernel's.
  int init(unsigned nr_tags, size_t rq_size);
  unsigned nr_tags = 0;
  std::unique_ptr<SbitmapQueue> bitmap_tags;
  std::vector<Request*> static_rqs;
  void* rq_memory = nullptr;
};

// Counts a plug gathers privately and publishes to its queue at each flush (a few atomic adds
// per flush, none per bio); the tag counts come from the sbitmaps' own per-slot counters.
struct QueueCounters {
  uint64_t requests = 0;       // requests made from bios
  uint64_t plug_flushes = 0;
  uint64_t split_checks = 0;   // bios that took the full split walk
  uint64_t splits = 0;
  uint64_t tag_waits = 0;      // allocations that had to wait for a free tag
  // Bios merged into a request instead of making one (blk_account_io_merge_bio), by the
  // request's op_stat_group(), as /sys/block/*/stat's read, write and discard merge columns.
  uint64_t read_merges = 0;
  uint64_t write_merges = 0;
  uint64_t discard_merges = 0;
  // Filled in by RequestQueue::counters() from the tag maps:
  uint64_t tag_calls = 0;      // sbitmap get calls (single and batch)
  uint64_t tag_batch_calls = 0;
  uint64_t tags = 0;           // tags those calls obtained
  QueueCounters& operator+=(const QueueCounters& o);
  double tags_per_call() const { return tag_calls ? double(tags) / double(tag_calls) : 0; }
};

// struct blk_mq_hw_ctx
struct alignas(64) BlkMqHwCtx {
  RequestQueue* queue;
  unsigned queue_num;
  bool polled = false;  // HCTX_TYPE_POLL: no completion interrupt; its submitters reap it
  std::atomic<const void*> cover_owner{nullptr};  // the thread covering its completions (blk_cover.h)
  std::unique_ptr<BlkMqTags> tags;
  void* driver_data = nullptr;
};

struct TagSetConfig {  // struct blk_mq_tag_set
  unsigned nr_hw_queues = 1;   // HCTX_TYPE_DEFAULT queues
  unsigned nr_poll_queues = 0; // HCTX_TYPE_POLL queues, after them (nvme's poll_queues)
  unsigned queue_depth = 128;
  unsigned cmd_size = 0;  // driver bytes after each request
};

struct BlkPlug;
class BlkTrace;
struct BlkTraceConfig;
struct BlkTraceStats;
class Status;
struct BlkTraceDeleter {  // blk_trace.cc, where BlkTrace is complete
  void operator()(BlkTrace* bt) const;
};

// struct request_queue + its tag set. Also the BlockDevice bios are aimed at (bi_bdev).
class RequestQueue {
 public:
  // An empty queue: init() sets it up, and nothing else may be called before it succeeds.
  RequestQueue(QueueLimits limits, BlkMqOps* ops, Toggles toggles = {});
  // blk_mq_alloc_tag_set() + blk_mq_alloc_queue(), once: checks the limits and the set,
  // allocates the hardware queues with their tags and requests, and asks the driver to take
  // each (init_hctx). 0; -EINVAL for invalid limits or settings, or a hardware queue the driver
  // refuses; -ENOMEM when memory for the requests or the queue's bio sets runs out. With `why`,
  // a failure leaves its one line there ("qd=0: expected 1..65536") for the caller's Status.
  int init(const TagSetConfig& set, std::string* why = nullptr);
  ~RequestQueue();
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  const QueueLimits& limits() const { return limits_; }
  // The toggles are live: set_toggles() takes effect for the next bio, as a write to a queue's
  // sysfs attribute does; each is read with one relaxed load where it is used, and a call that
  // reads one reads it once. bio_cache is only reported here: bio sets hold their own mode.
  Toggles toggles() const {
    return Toggles{bio_cache_.load(std::memory_order_relaxed), tag_batch(), split_check(), nomerges()};
  }
  void set_toggles(const Toggles& t) {
    bio_cache_.store(t.bio_cache, std::memory_order_relaxed);
    tag_batch_.store(t.tag_batch, std::memory_order_relaxed);
    split_check_.store(t.split_check, std::memory_order_relaxed);
    nomerges_.store(t.nomerges, std::memory_order_relaxed);
  }
  TagBatch tag_batch() const { return tag_batch_.load(std::memory_order_relaxed); }
  SplitCheck split_check() const { return split_check_.load(std::memory_order_relaxed); }
  // The sysfs `nomerges` (toggles.h): blk_queue_nomerges() is nomerges() == NoMerges::none.
  NoMerges nomerges() const { return nomerges_.load(std::memory_order_relaxed); }
  BlkMqOps* ops() const { return ops_; }
  unsigned nr_hw_queues() const { return unsigned(hctxs_.size()); }  // poll queues included
  unsigned nr_poll_queues() const { return nr_poll_; }
  unsigned queue_depth() const { return queue_depth_; }  // tags per hardware queue
  BlkMqHwCtx* hctx(unsigned i) { return hctxs_[i].get(); }
  // The calling thread's hardware queue for a request with these flags (blk_mq_map_queue):
  // a REQ_POLLED one goes to the poll queue of the thread's CPU.
  BlkMqHwCtx* map_queue(blk_opf_t opf = 0);
  BioSet& bio_split() { return bio_split_; }
  BioSet& bio_flush() { return bio_flush_; }  // the pre-flushes of blk_insert_flush()
  QueueCounters counters() const;
  void add_counters(const QueueCounters& c);  // a plug's counts, at finish or flush
  // The device number the tracepoints report (dev_t, MKDEV with 20 minor bits; 0 until set).
  uint32_t devt() const { return devt_; }
  void set_devt(uint32_t devt) { devt_ = devt; }
  // q->blk_trace: the blktrace this queue writes to, or null (blk_trace.h).
  BlkTrace* blk_trace() const { return blk_trace_.load(std::memory_order_relaxed); }

 private:
  friend Status blk_trace_setup(RequestQueue* q, const BlkTraceConfig& cfg);
  friend bool blk_trace_remove(RequestQueue* q, BlkTraceStats* stats);
  QueueLimits limits_;
  std::atomic<BioCache> bio_cache_;
  std::atomic<TagBatch> tag_batch_;
  std::atomic<SplitCheck> split_check_;
  std::atomic<NoMerges> nomerges_;
  BlkMqOps* ops_;
  std::vector<std::unique_ptr<BlkMqHwCtx>> hctxs_;
  unsigned nr_default_ = 0, nr_poll_ = 0;
  unsigned queue_depth_ = 0;
  BioSet bio_split_;
  BioSet bio_flush_;
  std::atomic<uint64_t> requests_{0}, plug_flushes_{0}, split_checks_{0}, splits_{0}, tag_waits_{0};
  std::atomic<uint64_t> read_merges_{0}, write_merges_{0}, discard_merges_{0};
  uint32_t devt_ = 0;
  std::atomic<BlkTrace*> blk_trace_{nullptr};
  // Every trace this queue has had: a thread may still be inside a tracepoint of a removed one
  // (the kernel waits for RCU readers instead).
  std::vector<std::unique_ptr<BlkTrace, BlkTraceDeleter>> traces_;
};

// The block device a bio is aimed at (bi_bdev): a blk-mq queue, or a bio-based driver such as
// the striped target, which takes bios itself (the kernel's fops->submit_bio).
struct BlockDevice {
  RequestQueue* queue = nullptr;
  void (*submit_bio_fn)(BlockDevice* bdev, Bio* bio) = nullptr;  // bio-based drivers only
  void* private_data = nullptr;
  sector_t capacity = 0;  // sectors
  std::string name;
};

// submit_bio(): hands a bio to its device. The bio's bi_end_io runs when it completes (perhaps
// before submit_bio returns, perhaps on another thread).
void submit_bio(Bio* bio);
// The blk-mq half of submit_bio(), for a bio whose device has a queue: the flush rules first
// (blk_flush.h), then the split check (the `split_check` toggle) and, where needed, the split
// into several requests; each request takes a tag — from the plug's cache of batch-allocated
// requests when there is one (the `tag_batch` toggle) — and joins the calling thread's plug,
// or without a plug goes to the driver at once. Never waits for the device, but may wait for
// a free tag; a REQ_NOWAIT bio that finds none ends with BLK_STS_AGAIN. A REQ_POLLED bio on a
// queue without poll queues ends with BLK_STS_NOTSUPP, as the kernel's. The bio may have
// completed by the time this returns.
void blk_mq_submit_bio(Bio* bio);

// struct blk_plug: per-thread batching of requests and of tag allocation.
struct BlkPlug {
  RqList mq_list;       // requests waiting for the flush
  RqList cached_rqs;    // requests allocated in a batch, not yet used
  unsigned short nr_ios = 1;
  unsigned short rq_count = 0;
  bool multiple_queues = false;  // requests for two queues met here; reset only by blk_start_plug
  RequestQueue* counted_queue = nullptr;  // the queue `counters` belong to
  QueueCounters counters;
};
void blk_start_plug_nr_ios(BlkPlug* plug, unsigned short nr_ios);
inline void blk_start_plug(BlkPlug* plug) { blk_start_plug_nr_ios(plug, 1); }
void blk_finish_plug(BlkPlug* plug);            // flushes, frees cached requests, publishes counts
void blk_flush_plug(BlkPlug* plug, bool from_schedule = false);             // dispatches what is plugged, frees cached requests
// Hands the plug's requests to their drivers, one queue_rqs() call per queue in submission
// order; leaves the plug empty. Completions may run inside it (null_blk, brd).
void blk_mq_flush_plug_list(BlkPlug* plug, bool from_schedule = false);
// current->plug: the calling thread's outermost started plug, or nullptr. A nested
// blk_start_plug() is ignored, so this is the plug that will flush.
BlkPlug* current_plug();
// The kernel's sched_submit_work() (kernel/sched/core.c, v6.18), for a thread about to sleep:
// dispatch what its plug holds, which may be what it, or whoever it waits for, is waiting for,
// and free the requests it had cached (__blk_flush_plug); and, as the kernel wakes another
// io-wq worker when one sleeps (io_wq_worker_sleeping), hand a hardware queue whose completions
// the thread covers back to the driver's completion thread (blk_cover.h). Its one caller is
// schedule() (schedule.h), the door every sleep of a thread that submits I/O goes through (a
// plug can outlive one submission: a FUSE ring thread keeps one across a batch of requests).
void sched_submit_work();

// struct io_comp_batch: completions gathered so that tags are freed in batches.
struct IoCompBatch {
  RqList req_list;
  unsigned count = 0;
};
// Ends every request in the batch (their bios first), freeing tags TAG_COMP_BATCH at a time.
void blk_mq_end_request_batch(IoCompBatch* iob);
// Adds a finished request to a batch. Requests with an error are not batched: returns false
// and the caller ends them with blk_mq_end_request().
inline bool blk_mq_add_to_batch(Request* rq, IoCompBatch* iob, blk_status_t status) {
  if (status != BLK_STS_OK) return false;
  iob->req_list.add_tail(rq);
  iob->count++;
  return true;
}
// Ends one request: completes its bios with `status`, then frees its tag.
void blk_mq_end_request(Request* rq, blk_status_t status);

}  // namespace biofs
