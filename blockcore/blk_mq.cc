// Counterpart of block/blk-mq.c, block/blk-mq-tag.c and the plugging half of block/blk-core.c.
#include "blk_mq.h"
#include "blk_trace.h"

#include "blk.h"
#include "blk_cover.h"
#include "blk_flush.h"
#include "blk_poll.h"
#include "blk_rq_merge.h"
#include "schedule.h"

#include <sched.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "sbitmap.h"
#include "stage_clock.h"

namespace biofs {

namespace {
thread_local BlkPlug* tls_plug = nullptr;  // current->plug
thread_local int tls_cpu = -1;             // the CPU this thread first submitted from
thread_local int tls_poll_slot = -1;       // the poll queue this thread took (blk_poll.h)
std::atomic<unsigned> next_poll_slot{0};
}  // namespace

QueueCounters& QueueCounters::operator+=(const QueueCounters& o) {
  requests += o.requests;
  plug_flushes += o.plug_flushes;
  split_checks += o.split_checks;
  splits += o.splits;
  tag_waits += o.tag_waits;
  read_merges += o.read_merges;
  write_merges += o.write_merges;
  discard_merges += o.discard_merges;
  tag_calls += o.tag_calls;
  tag_batch_calls += o.tag_batch_calls;
  tags += o.tags;
  return *this;
}

// ---- tags and requests -----------------------------------------------------------------

int BlkMqTags::init(unsigned nr, size_t rq_size) {
  nr_tags = nr;
  bitmap_tags = std::make_unique<SbitmapQueue>();
  if (int ret = sbitmap_queue_init_node(bitmap_tags.get(), nr); ret) return ret;
  rq_size = (rq_size + 63) & ~size_t(63);
  rq_memory = std::aligned_alloc(64, rq_size * nr);
  if (!rq_memory) return -ENOMEM;
  static_rqs.resize(nr);
  for (unsigned i = 0; i < nr; i++) {
    static_rqs[i] = new (static_cast<uint8_t*>(rq_memory) + i * rq_size) Request{};
    static_rqs[i]->tag = int(i);
  }
  return 0;
}

BlkMqTags::~BlkMqTags() { std::free(rq_memory); }

void BlkMqOps::queue_rqs(RqList* rqs) {
  // The default: one queue_rq per request, ringing the doorbell at the end of each hctx's run.
  while (Request* rq = rqs->pop()) {
    Request* next = rqs->peek();
    const bool last = !next || next->mq_hctx != rq->mq_hctx;
    for (;;) {
      const blk_status_t st = queue_rq(rq->mq_hctx, rq, last);
      if (st == BLK_STS_OK) break;
      if (st != BLK_STS_RESOURCE && st != BLK_STS_AGAIN) {
        blk_mq_end_request(rq, st);
        break;
      }
      commit_rqs(rq->mq_hctx);  // busy: let the device see what it has, then retry
      std::this_thread::yield();
    }
  }
}

RequestQueue::RequestQueue(QueueLimits limits, BlkMqOps* ops, Toggles toggles)
    : limits_(limits),
      bio_cache_(toggles.bio_cache),
      tag_batch_(toggles.tag_batch),
      split_check_(toggles.split_check),
      nomerges_(toggles.nomerges),
      ops_(ops), bio_split_(4, 0, 0),
      bio_flush_(4, 0, 0) {}

int RequestQueue::init(const TagSetConfig& set, std::string* why) {
  auto fail = [why](int err, std::string msg) {
    if (why) *why = std::move(msg);
    return err;
  };
  if (std::string err = blk_validate_limits(limits_); !err.empty()) return fail(-EINVAL, "queue limits: " + err);
  if (set.nr_hw_queues == 0 || set.nr_hw_queues > 256)
    return fail(-EINVAL, "queues=" + std::to_string(set.nr_hw_queues) + ": expected 1..256");
  if (set.nr_poll_queues > 256)
    return fail(-EINVAL, "poll_queues=" + std::to_string(set.nr_poll_queues) + ": expected 0..256");
  if (set.queue_depth == 0 || set.queue_depth > 65536)
    return fail(-EINVAL, "qd=" + std::to_string(set.queue_depth) + ": expected 1..65536");
  if (int ret = bio_split_.init(); ret) return fail(ret, bioset_init_error(ret));
  if (int ret = bio_flush_.init(); ret) return fail(ret, bioset_init_error(ret));
  queue_depth_ = set.queue_depth;
  nr_default_ = set.nr_hw_queues;
  nr_poll_ = set.nr_poll_queues;
  for (unsigned i = 0; i < nr_default_ + nr_poll_; i++) {
    auto hctx = std::make_unique<BlkMqHwCtx>();
    hctx->queue = this;
    hctx->queue_num = i;
    hctx->polled = i >= nr_default_;
    hctx->tags = std::make_unique<BlkMqTags>();
    if (int ret = hctx->tags->init(set.queue_depth, sizeof(Request) + set.cmd_size); ret)
      return fail(ret, "hardware queue " + std::to_string(i) + ": " + std::strerror(-ret));
    if (ops_->init_hctx(hctx.get(), i) != 0)
      return fail(-EINVAL, "driver refused hardware queue " + std::to_string(i));
    hctxs_.push_back(std::move(hctx));
  }
  return 0;
}

RequestQueue::~RequestQueue() = default;

bool blk_poll_thread_polls() { return tls_poll_slot >= 0; }

// blk_mq_can_poll(): the queue has poll queues (HCTX_TYPE_POLL).
static bool blk_mq_can_poll(const RequestQueue* q) { return q->nr_poll_queues() != 0; }

BlkMqHwCtx* RequestQueue::map_queue(blk_opf_t opf) {
  if (tls_cpu < 0) [[unlikely]] {
    const int cpu = sched_getcpu();
    tls_cpu = cpu < 0 ? 0 : cpu;
  }
  if ((opf & REQ_POLLED) && nr_poll_) {  // a poll queue per polling thread, in turn (blk_poll.h)
    if (tls_poll_slot < 0) [[unlikely]]
      tls_poll_slot = int(next_poll_slot.fetch_add(1, std::memory_order_relaxed) & 0xffff);
    return hctxs_[nr_default_ + unsigned(tls_poll_slot) % nr_poll_].get();
  }
  return hctxs_[unsigned(tls_cpu) % nr_default_].get();
}

void RequestQueue::add_counters(const QueueCounters& c) {
  if (c.requests) requests_.fetch_add(c.requests, std::memory_order_relaxed);
  if (c.plug_flushes) plug_flushes_.fetch_add(c.plug_flushes, std::memory_order_relaxed);
  if (c.split_checks) split_checks_.fetch_add(c.split_checks, std::memory_order_relaxed);
  if (c.splits) splits_.fetch_add(c.splits, std::memory_order_relaxed);
  if (c.tag_waits) tag_waits_.fetch_add(c.tag_waits, std::memory_order_relaxed);
  if (c.read_merges) read_merges_.fetch_add(c.read_merges, std::memory_order_relaxed);
  if (c.write_merges) write_merges_.fetch_add(c.write_merges, std::memory_order_relaxed);
  if (c.discard_merges) discard_merges_.fetch_add(c.discard_merges, std::memory_order_relaxed);
}

QueueCounters RequestQueue::counters() const {
  QueueCounters c;
  c.requests = requests_.load(std::memory_order_relaxed);
  c.plug_flushes = plug_flushes_.load(std::memory_order_relaxed);
  c.split_checks = split_checks_.load(std::memory_order_relaxed);
  c.splits = splits_.load(std::memory_order_relaxed);
  c.tag_waits = tag_waits_.load(std::memory_order_relaxed);
  c.read_merges = read_merges_.load(std::memory_order_relaxed);
  c.write_merges = write_merges_.load(std::memory_order_relaxed);
  c.discard_merges = discard_merges_.load(std::memory_order_relaxed);
  for (const auto& hctx : hctxs_) {
    const SbitmapStats s = sbitmap_queue_stats(hctx->tags->bitmap_tags.get());
    c.tag_calls += s.alloc_calls();
    c.tag_batch_calls += s.batch_gets;
    c.tags += s.tags_obtained();
  }
  return c;
}

// struct blk_mq_alloc_data
struct BlkMqAllocData {
  RequestQueue* q;
  BlkMqHwCtx* hctx;
  blk_opf_t cmd_flags;
  unsigned nr_tags;
  RqList* cached_rqs;
  QueueCounters* counters;
  const Bio* bio;            // the bio the request is for (the sleep's tracepoint)
  bool clamp_batch = false;  // tag_batch=clamp: a batch asks for at most one word's bits
};

// blk_mq_rq_ctx_init()
static Request* blk_mq_rq_ctx_init(BlkMqAllocData* data, int tag, unsigned cpu) {
  Request* rq = data->hctx->tags->static_rqs[tag];
  rq->q = data->q;
  rq->mq_hctx = data->hctx;
  rq->cmd_flags = data->cmd_flags;
  rq->bio = rq->biotail = nullptr;
  rq->rq_next = nullptr;
  rq->status = BLK_STS_OK;
  rq->rq_flags = 0;
  rq->alloc_cpu = uint16_t(cpu);
  return rq;
}

// blk_mq_get_tags(): up to nr_tags tags from one sbitmap word, as a mask from *offset. As in
// v6.18, nr_tags over a word's bits gets nothing (0): a plug of 32 on a queue whose words are
// narrower falls back to single tags. tag_batch=clamp asks for one word's worth instead.
static unsigned long blk_mq_get_tags(BlkMqAllocData* data, int nr_tags, unsigned* offset) {
  SbitmapQueue* sbq = data->hctx->tags->bitmap_tags.get();
  if (data->clamp_batch) nr_tags = std::min(nr_tags, int(1u << sbq->sb.shift));
  return sbitmap_queue_get_batch(sbq, nr_tags, offset);
}

// __blk_mq_alloc_requests_batch(): tags for up to data->nr_tags requests; all but the one
// returned go to data->cached_rqs. `loop` keeps asking until it has them all (upstream 6.19);
// without it one sbitmap call is made and a partial batch is what it is. data->nr_tags is left
// holding how many are still missing, which is what tag_batch=retain keeps in plug->nr_ios.
static Request* blk_mq_alloc_requests_batch(BlkMqAllocData* data, bool loop) {
  const unsigned cpu = sbitmap_current_cpu();
  unsigned nr = 0;
  do {
    unsigned offset = 0;
    unsigned long mask = blk_mq_get_tags(data, int(data->nr_tags - nr), &offset);
    if (!mask) {
      if (!nr) return nullptr;
      break;
    }
    for (; mask; mask &= mask - 1) {
      const int tag = int(offset) + __builtin_ctzl(mask);
      data->cached_rqs->add_head(blk_mq_rq_ctx_init(data, tag, cpu));
      nr++;
    }
  } while (loop && data->nr_tags > nr);
  data->nr_tags -= nr;
  return data->cached_rqs->pop();
}

// blk_mq_get_tag(): one tag; waits for one unless REQ_NOWAIT. Before sleeping, the caller's plug
// is flushed (the kernel's io_schedule() does it): its requests may hold the tags we wait for.
static int blk_mq_get_tag(BlkMqAllocData* data, unsigned* cpu) {
  SbitmapQueue* sbq = data->hctx->tags->bitmap_tags.get();
  int tag = sbitmap_queue_get(sbq, cpu);
  if (tag >= 0) [[likely]]
    return tag;
  if (data->cmd_flags & REQ_NOWAIT) return -1;
  data->counters->tag_waits++;
  trace_block_sleeprq(data->q, data->bio);
  if (!data->hctx->polled) {  // io_schedule() until a completion frees one
    schedule([&] { tag = sbitmap_queue_get_wait(sbq, cpu); });
    return tag;
  }
  // A poll queue has no completion thread to free tags: whoever waits for one reaps (and
  // blk_mq_poll() dispatches the plug first, whose requests may hold them).
  for (;;) {
    if (blk_mq_poll(data->hctx, true) == 0) std::this_thread::yield();
    if ((tag = sbitmap_queue_get(sbq, cpu)) >= 0) return tag;
  }
}

// __blk_mq_alloc_requests()
static Request* blk_mq_alloc_requests(BlkMqAllocData* data, bool loop) {
  if (data->nr_tags > 1) {
    if (Request* rq = blk_mq_alloc_requests_batch(data, loop)) return rq;
    data->nr_tags = 1;
  }
  unsigned cpu = 0;
  const int tag = blk_mq_get_tag(data, &cpu);
  if (tag < 0) return nullptr;
  return blk_mq_rq_ctx_init(data, tag, cpu);
}

// blk_mq_get_new_requests(): the tag_batch toggle lives here.
static Request* blk_mq_get_new_requests(RequestQueue* q, BlkPlug* plug, Bio* bio, QueueCounters* counters) {
  BlkMqAllocData data{q, q->map_queue(bio->bi_opf), bio->bi_opf, 1, nullptr, counters, bio};
  const TagBatch mode = q->tag_batch();  // once: a live change takes the next call
  RqList unused;
  data.cached_rqs = &unused;
  if (plug && mode != TagBatch::off) {
    data.nr_tags = plug->nr_ios;
    if (mode != TagBatch::retain) plug->nr_ios = 1;  // plain, loop, clamp: only the first asks for more
    data.cached_rqs = &plug->cached_rqs;
  }
  data.clamp_batch = mode == TagBatch::clamp;
  Request* rq = blk_mq_alloc_requests(&data, mode == TagBatch::loop || mode == TagBatch::clamp);
  if (plug && mode == TagBatch::retain) plug->nr_ios = (unsigned short)data.nr_tags;  // retry the rest
  return rq;
}

// v6.18 blk_mq_peek_cached_request(): the plug's first cached request (the list is LIFO:
// __blk_mq_alloc_requests_batch adds at the head), if it suits this bio: the same queue, the
// same hctx type (here: polled or not) and the same flush-ness (op_is_flush() of the flags the
// request was allocated with); otherwise none, and the bio allocates anew.
static Request* blk_mq_peek_cached_request(BlkPlug* plug, RequestQueue* q, blk_opf_t opf) {
  Request* rq = plug->cached_rqs.peek();
  if (!rq || rq->q != q) return nullptr;
  if (rq->mq_hctx->polled != ((opf & REQ_POLLED) != 0)) return nullptr;  // another hctx type
  if (op_is_flush(rq->cmd_flags) != op_is_flush(opf)) return nullptr;
  return rq;
}

// v6.18 blk_mq_use_cached_rq(): takes it off the plug's list for this bio.
static void blk_mq_use_cached_rq(Request* rq, BlkPlug* plug, const Bio* bio) {
  plug->cached_rqs.pop();
  rq->cmd_flags = bio->bi_opf;
}

// blk_mq_bio_to_request()
static void blk_mq_bio_to_request(Request* rq, Bio* bio, unsigned nr_segs) {
  rq->cmd_flags = bio->bi_opf;
  rq->__sector = bio->bi_iter.bi_sector;
  rq->__data_len = bio->bi_iter.bi_size;
  rq->nr_phys_segments = uint16_t(nr_segs);
  rq->io_start_time_ns = 0;  // stamped by the driver if this I/O is sampled
  bio->bi_next = nullptr;
  rq->bio = rq->biotail = bio;
}

static void blk_mq_free_request(Request* rq) {
  sbitmap_queue_clear(rq->mq_hctx->tags->bitmap_tags.get(), unsigned(rq->tag), rq->alloc_cpu);
}

// ---- plugging ------------------------------------------------------------------------------

BlkPlug* current_plug() { return tls_plug; }

void sched_submit_work() {
  if (tls_plug) [[unlikely]]
    blk_flush_plug(tls_plug, true);
  blk_cover_pause();
}

void blk_start_plug_nr_ios(BlkPlug* plug, unsigned short nr_ios) {
  if (tls_plug) return;  // nested plugs are ignored; the outermost one flushes
  plug->mq_list = RqList{};
  plug->cached_rqs = RqList{};
  plug->nr_ios = nr_ios < BLK_MAX_REQUEST_COUNT ? (nr_ios ? nr_ios : 1) : BLK_MAX_REQUEST_COUNT;
  plug->rq_count = 0;
  plug->multiple_queues = false;
  plug->counted_queue = nullptr;
  plug->counters = QueueCounters{};
  tls_plug = plug;
}

static void publish_counters(BlkPlug* plug) {
  if (plug->counted_queue) plug->counted_queue->add_counters(plug->counters);
  plug->counters = QueueCounters{};
}

// The counters to charge a bio for `q` to: the plug's, republishing if the queue changed.
static QueueCounters* plug_counters(BlkPlug* plug, RequestQueue* q) {
  if (plug->counted_queue != q) {
    publish_counters(plug);
    plug->counted_queue = q;
  }
  return &plug->counters;
}

// Hands one queue's requests to its driver in one call; what it leaves goes one by one.
[[gnu::always_inline]] inline void blk_mq_dispatch_queue_list(RqList* list) {
  RequestQueue* q = list->peek()->q;
  trace_block_rq_issue_list(list->head);
  q->ops()->queue_rqs(list);
  if (!list->empty()) q->ops()->BlkMqOps::queue_rqs(list);
}

// v6.18 blk_mq_free_plug_rqs()
static void blk_mq_free_plug_rqs(BlkPlug* plug) {
  while (Request* rq = plug->cached_rqs.pop()) blk_mq_free_request(rq);
}

// v6.18 __blk_flush_plug(): dispatches what is plugged, then frees the cached requests
// unconditionally, also on the flush of a task about to sleep: a blocked submitter must not
// hold tags it is not using (it may be waiting for a tag of another queue, or someone else for
// one of these). The kernel's flush from schedule() inserts the requests and runs the hardware
// queue asynchronously (kblockd); here the sleeping thread dispatches them itself through
// queue_rqs. A thread here blocks only at the waits that call this, never in the middle of a
// driver call, and there is no kblockd: an asynchronous run would be a hand-off to another
// thread that the kernel's path does not have.
void blk_flush_plug(BlkPlug* plug, bool from_schedule) {
  if (plug->rq_count) blk_mq_flush_plug_list(plug, from_schedule);
  if (!plug->cached_rqs.empty()) [[unlikely]]
    blk_mq_free_plug_rqs(plug);
}

// The unplug is traced per queue with that queue's depth, "explicit" unless the flush is on the
// way to sleep (v6.18 blk_mq_flush_plug_list / blk_mq_dispatch_list: !from_schedule).
void blk_mq_flush_plug_list(BlkPlug* plug, bool from_schedule) {
  RqList list = plug->mq_list;
  const unsigned depth = plug->rq_count;
  const bool multiple = plug->multiple_queues;
  plug->mq_list = RqList{};
  plug->rq_count = 0;
  // multiple_queues stays set: only blk_start_plug resets it (__blk_start_plug), so a plug
  // that has seen two queues keeps the doubled limit and the per-queue dispatch to its end.
  plug->counters.plug_flushes++;
  publish_counters(plug);
  stage_mark_flush();
  if (!multiple) {
    trace_block_unplug(list.peek()->q, depth, !from_schedule);
    blk_mq_dispatch_queue_list(&list);
    stage_dispatched();
    return;
  }
  // Several queues: dispatch each queue's requests in submission order, one list per queue.
  while (!list.empty()) {
    RequestQueue* q = list.peek()->q;
    RqList mine, others;
    unsigned mine_depth = 0;
    while (Request* rq = list.pop()) {
      if (rq->q == q) {
        mine.add_tail(rq);
        mine_depth++;
      } else {
        others.add_tail(rq);
      }
    }
    trace_block_unplug(q, mine_depth, !from_schedule);
    blk_mq_dispatch_queue_list(&mine);
    list = others;
  }
  stage_dispatched();
}

// blk_plug_max_rq_count(): twice BLK_MAX_REQUEST_COUNT once the plug has seen several queues.
static unsigned blk_plug_max_rq_count(const BlkPlug* plug) {
  return plug->multiple_queues ? 2 * BLK_MAX_REQUEST_COUNT : BLK_MAX_REQUEST_COUNT;
}

// blk_add_rq_to_plug(), as in mainline v6.18 (since "blk-mq: don't reorder requests in
// blk_add_rq_to_plug", v6.13, the plug list is in submission order, added at the tail):
//  - `last` is rq_list_peek(&plug->mq_list), the list's head: the OLDEST request in the plug
//    (the first one added since the last flush), not the one added just before rq;
//  - a plug that holds requests is flushed before rq joins it when it holds
//    blk_plug_max_rq_count() requests or, unless the queue has QUEUE_FLAG_NOMERGES
//    (nomerges=2, `nomerges` here), when `last` is BLK_PLUG_FLUSH_SIZE (128 KiB) or more; with
//    merging a sequential stream grows `last` to that size by merges, and the next request
//    then flushes it;
//  - after a flush `last` is NULL, so rq alone never marks the plug as multiple_queues.
//  - block_plug is traced when rq starts the list: into an empty plug, or after that flush.
static void blk_add_rq_to_plug(BlkPlug* plug, Request* rq, bool nomerges) {
  Request* last = plug->mq_list.peek();
  if (!plug->rq_count) {
    trace_block_plug(rq->q);
  } else if (plug->rq_count >= blk_plug_max_rq_count(plug) ||
             (!nomerges && blk_rq_bytes(last) >= BLK_PLUG_FLUSH_SIZE)) {
    blk_mq_flush_plug_list(plug);
    last = nullptr;
    trace_block_plug(rq->q);
  }
  if (!plug->multiple_queues && last && last->q != rq->q) plug->multiple_queues = true;
  plug->mq_list.add_tail(rq);
  plug->rq_count++;
}

void blk_finish_plug(BlkPlug* plug) {
  if (plug != tls_plug) return;
  blk_flush_plug(plug);
  publish_counters(plug);
  tls_plug = nullptr;
}

// ---- submission ----------------------------------------------------------------------------

void submit_bio(Bio* bio) {
  BlockDevice* bdev = bio->bi_bdev;
  if (bdev->queue) [[likely]]
    blk_mq_submit_bio(bio);
  else
    bdev->submit_bio_fn(bdev, bio);
}

void blk_mq_submit_bio(Bio* bio) { blk_mq_submit_bio_plug(bio, tls_plug); }

// v6.18 bio_unaligned(): a bio whose size or start is not a multiple of the logical block size
// (a zero-sized bio's sector counts too).
static inline bool bio_unaligned(const Bio* bio, const RequestQueue* q) {
  const uint32_t bs_mask = q->limits().logical_block_size - 1;
  return (bio->bi_iter.bi_size & bs_mask) || ((bio->bi_iter.bi_sector << SECTOR_SHIFT) & bs_mask);
}

void blk_mq_submit_bio_plug(Bio* bio, BlkPlug* plug) {
  RequestQueue* q = bio->bi_bdev->queue;
  trace_block_bio_queue(q, bio);  // submit_bio_noacct_nocheck(), before everything below
  // v6.18 blk_mq_submit_bio(): checked before the poll check and the split, and ended with
  // bio_io_error(): no request is made, nothing reaches the driver.
  if (bio_unaligned(bio, q)) [[unlikely]] {
    bio_set_status(bio, BLK_STS_IOERR);
    bio_endio(bio);
    return;
  }
  if (bio->bi_opf & REQ_POLLED) [[unlikely]] {
    // v6.18 blk_mq_submit_bio(): a polled bio on a queue that cannot poll is refused with
    // BLK_STS_NOTSUPP (-EOPNOTSUPP), not quietly turned into an unpolled one.
    if (!blk_mq_can_poll(q)) {
      bio_set_status(bio, BLK_STS_NOTSUPP);
      bio_endio(bio);
      return;
    }
    // bio_clear_polled() for flush sequences (whose steps are issued from other threads'
    // completions): the bio completes the usual way. A FUA write without REQ_PREFLUSH is no
    // sequence (blk_flush.h, rule 4: blk_insert_flush() queues it "for normal execution"), so
    // it is polled like any write.
    if (bio->bi_opf & REQ_PREFLUSH) bio->bi_opf &= ~REQ_POLLED;
  }
  if (blk_insert_flush(bio)) [[unlikely]]
    return;
  QueueCounters local;
  QueueCounters* counters = plug ? plug_counters(plug, q) : &local;
  const bool nomerges = q->nomerges() == NoMerges::none;  // blk_queue_nomerges(), read once
  for (;;) {
    unsigned nr_segs = 1;
    Bio* issue = bio;
    if (bio_may_need_split(bio, q->limits(), q->split_check())) {
      SplitCounters sc;
      issue = bio_split_to_limits(bio, q->limits(), &nr_segs, &q->bio_split(), &sc);
      counters->split_checks += sc.checks;
      counters->splits += sc.splits;
      stage_mark(STAGE_SPLIT);
      if (!issue) break;  // ended with an error
      if (issue != bio) trace_block_split(q, issue, bio->bi_iter.bi_sector);
    }
    // v6.18 blk_mq_attempt_bio_merge(): into the plug's last request of this queue (blk_rq_merge.h).
    // blk_mq_sched_bio_merge() has nothing to look at: no elevator, no software queues.
    if (plug && plug->rq_count && !nomerges && bio_mergeable(issue) &&
        blk_attempt_plug_merge(plug, q, issue, nr_segs, counters)) {
      if (issue == bio) break;
      continue;
    }
    Request* rq = plug ? blk_mq_peek_cached_request(plug, q, issue->bi_opf) : nullptr;
    if (rq)
      blk_mq_use_cached_rq(rq, plug, issue);
    else
      rq = blk_mq_get_new_requests(q, plug, issue, counters);
    stage_mark(STAGE_TAG);
    if (!rq) [[unlikely]] {  // REQ_NOWAIT and no tag
      bio_set_status(issue, BLK_STS_AGAIN);
      bio_endio(issue);
      if (issue == bio) break;
      continue;
    }
    trace_block_getrq(q, issue);
    blk_mq_bio_to_request(rq, issue, nr_segs);
    counters->requests++;
    if (plug) {
      blk_add_rq_to_plug(plug, rq, nomerges);
    } else {
      RqList one;
      one.add_tail(rq);
      blk_mq_dispatch_queue_list(&one);
      stage_dispatched();
    }
    if (issue == bio) break;
  }
  if (!plug) q->add_counters(local);
}

// ---- completion ----------------------------------------------------------------------------

// blk_update_request() for a whole request: ends every bio with the request's status.
static void blk_mq_end_bios(Request* rq, blk_status_t status) {
  stage_rq_completed(rq);
  trace_block_rq_complete(rq, status);
  blk_stat_account_done(req_op_of(rq), blk_rq_bytes(rq), status != BLK_STS_OK);  // blk_account_io_done
  Bio* bio = rq->bio;
  rq->bio = rq->biotail = nullptr;
  while (bio) {
    Bio* next = bio->bi_next;
    bio->bi_next = nullptr;
    if (status != BLK_STS_OK) bio_set_status(bio, status);
    bio_endio(bio);
    bio = next;
  }
}

void blk_mq_end_request(Request* rq, blk_status_t status) {
  blk_mq_end_bios(rq, status);
  blk_mq_free_request(rq);
}

void blk_mq_end_request_batch(IoCompBatch* iob) {
  int tags[TAG_COMP_BATCH];
  int nr = 0;
  SbitmapQueue* cur = nullptr;
  while (Request* rq = iob->req_list.pop()) {
    SbitmapQueue* sbq = rq->mq_hctx->tags->bitmap_tags.get();
    const int tag = rq->tag;
    blk_mq_end_bios(rq, rq->status);
    if (nr == int(TAG_COMP_BATCH) || (cur && sbq != cur)) {  // blk_mq_flush_tag_batch()
      sbitmap_queue_clear_batch(cur, 0, tags, nr);
      nr = 0;
    }
    cur = sbq;
    tags[nr++] = tag;
  }
  if (nr) sbitmap_queue_clear_batch(cur, 0, tags, nr);
  iob->count = 0;
}

}  // namespace biofs
