#include "data_requests.h"

#include <fcntl.h>
#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/blk_poll.h"
#include "blockcore/stage_clock.h"
#include "blockcore/usdt.h"
#include "fuse_compat.h"
#include "fuse_reactor.h"

namespace biofs {

namespace {

// Reads and writes reply from the completion path: the thread that handled the request submits
// the bios and goes back for the next one, so a few threads keep many I/Os in flight. Over the
// reactor's ring the reply is made on the reactor thread itself where it covers the device's
// queue (blockcore/blk_cover.h), else posted to it (fuse_reactor.h). The
// reply ends the request's sampled per-stage trace (blockcore/stage_clock.h).
void count_reply_elsewhere(FuseContext* ctx, bool on_ring, pthread_t receiver) {
  if (on_ring && !pthread_equal(pthread_self(), receiver))
    ctx->replies_elsewhere.fetch_add(1, std::memory_order_relaxed);
}

// Whether `req` came over a FUSE ring, libfuse's or the reactor's (fuse_reactor.h), and then how
// many requests wait behind it in its thread's ring (the reactor's: stock libfuse does not say).
bool request_on_ring(fuse_req_t req, int* waiting) {  // req: nullptr for the reactor's hot requests
  if (FuseReactor::current_request(nullptr, nullptr, waiting)) return true;
  *waiting = 0;
  return fuse_req_on_ring(req);
}

void note_transport(FuseContext* ctx, fuse_req_t req) {
  const int now = FuseReactor::current_request(nullptr, nullptr, nullptr) ? 3 : fuse_req_on_ring(req) ? 2 : 1;
  if (ctx->transport.load(std::memory_order_relaxed) != now) ctx->transport.store(now, std::memory_order_relaxed);
}

// A reactor thread runs a request to completion only when no request waits in its ring behind
// it, nor did behind any of its last 8: a queue that fills now and then is a deep one, and a
// thread that polls holds it up. (libfuse's ring threads always do: HeldReply.)
thread_local uint8_t tls_backlog = 0;  // one bit per recent request: others waited behind it

// Plugging across a ring batch, as the kernel's io_uring plugs across a batch of SQEs
// (io_submit_sqes: blk_start_plug_nr_ios(submit_nr) at the first request that plugs,
// blk_finish_plug when the batch is in). A ring thread that handles a read or write with
// requests waiting behind it in its ring starts a plug sized for them, and keeps it, as its
// current plug, until the batch ends (fuse_ring_batch_end(), FuseReactor::Config::batch_end): the batch's bios
// reach the driver in one queue_rqs() call and take their tags in batches (tag_batch=). Every
// sleep dispatches it first (schedule(), blockcore/schedule.h).
thread_local BlkPlug tls_batch_plug;

void plug_ring_batch(int waiting) {
  if (waiting > 0 && !current_plug())
    blk_start_plug_nr_ios(&tls_batch_plug, uint16_t(std::min(waiting + 1, int(BLK_MAX_REQUEST_COUNT))));
}

// Counts a read or write in the daemon and decides whether its worker runs it to completion
// (FuseContext::threads says when); then the I/O is polled in `group` until it has ended.
// Otherwise it is counted as asynchronous until end_data_request().
bool decide_data_request(FuseContext* ctx, fuse_req_t req, size_t size, BlkPollGroup* group) {
  ctx->callbacks_pending.fetch_add(1, std::memory_order_relaxed);
  const unsigned others = ctx->data_requests.fetch_add(1, std::memory_order_relaxed);
  bool receiver_free;
  int waiting = 0;
  if (request_on_ring(req, &waiting)) {
    tls_backlog = uint8_t(tls_backlog << 1 | (waiting > 0));
    receiver_free = (others == 0 && tls_backlog == 0) || ctx->want_uring;  // libfuse's ring: HeldReply waits anyway
    if (ctx->ring_plug.load(std::memory_order_relaxed)) plug_ring_batch(waiting);
  } else {
    receiver_free = others + 1 < ctx->threads;
  }
  if (size > FuseContext::POLL_MAX_BYTES || !receiver_free) return false;
  if (!blk_poll_group_start(group, ctx->fs->io().bdev()->queue)) return false;
  ctx->polled.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool start_data_request(FuseContext* ctx, fuse_req_t req, size_t size, BlkPollGroup* group) {
  const bool poll = decide_data_request(ctx, req, size, group);
  if (!poll) ctx->async_requests.fetch_add(1, std::memory_order_relaxed);
  return poll;
}

void end_data_request(FuseContext* ctx, bool polled) {
  if (!polled) ctx->async_requests.fetch_sub(1, std::memory_order_relaxed);
  ctx->data_requests.fetch_sub(1, std::memory_order_relaxed);
}

// The last thing a read or write callback does: `req` may be gone (answered), ctx is not.
void end_callback(FuseContext* ctx) { ctx->callbacks_pending.fetch_sub(1, std::memory_order_release); }

// libfuse's own ring, stock (fuse_uring=libfuse), takes no reply from another thread safely: its
// ring thread holds the queue's lock while it handles a batch, so such a reply waits for the
// batch (a handler waiting for that reply never returns), and it flushes the SQ ring without
// that lock (libfuse issue #1443, fixed after 3.18.3). There a read or write runs to completion:
// the completion leaves its result here and the handler, on the ring thread, replies.
class HeldReply {
 public:
  // payload: where a read's data is meant to land (the ring's payload buffer), or nullptr.
  explicit HeldReply(const void* payload = nullptr) : payload_(static_cast<const uint8_t*>(payload)) {}
  // From the completion: the result, and a read's data unless it is already in the payload.
  void finish(ssize_t n, const uint8_t* data = nullptr) {
    std::lock_guard<std::mutex> l(m_);
    n_ = n;
    if (n > 0 && data && data != payload_) data_.assign(data, data + n);
    data_ptr_ = n > 0 ? (data == payload_ ? payload_ : data_.data()) : nullptr;
    done_ = true;
    cv_.notify_one();  // under the lock: the handler cannot have gone yet
  }
  // From the handler, after finish(): waits for it and returns the result.
  ssize_t wait(const uint8_t** data = nullptr) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [this] { return done_; });
    if (data) *data = data_ptr_;
    return n_;
  }

 private:
  const uint8_t* const payload_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  ssize_t n_ = 0;
  std::vector<uint8_t> data_;
  const uint8_t* data_ptr_ = nullptr;
};


// The reply to a read or write, from its callback or (HeldReply) its handler, ending its trace.
void reply_read(const DataRequest& d, StageToken t, ssize_t n, const uint8_t* data) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_reply, d.who, n);
  if (d.hot) FuseReactor::reply_hot(d.who, n < 0 ? int(-n) : 0, data, n < 0 ? 0 : size_t(n));
  else if (n < 0) fuse_reply_err(d.req(), int(-n));
  else fuse_reply_buf(d.req(), reinterpret_cast<const char*>(data), size_t(n));
  stage_request_reply(t);
}
void reply_write(const DataRequest& d, StageToken t, ssize_t n) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_reply, d.who, n);
  if (d.hot) {
    const fuse_write_out out{uint32_t(n < 0 ? 0 : n), 0};
    FuseReactor::reply_hot(d.who, n < 0 ? int(-n) : 0, &out, sizeof(out));
  } else if (n < 0) {
    fuse_reply_err(d.req(), int(-n));
  } else {
    fuse_reply_write(d.req(), size_t(n));
  }
  stage_request_reply(t);
}

}  // namespace

void read_data(const DataRequest& d, fuse_ino_t ino, size_t size, off_t off) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_receive, d.who, FUSE_READ, size, ino, off);
  const StageToken t = stage_request_received();
  FuseContext* ctx = d.ctx;
  note_transport(ctx, d.req());
  BlkPollGroup group;
  // Over io_uring the reply's payload buffer is the request's own (page-aligned) and the reply
  // goes without a copy when the data is already there: the read goes straight into it.
  char* payload = nullptr;
  size_t payload_size = 0;
  const bool reactor = FuseReactor::current_request(&payload, &payload_size, nullptr);
  const bool on_ring = reactor || fuse_req_on_ring(d.req());  // req is gone once answered
  const bool poll = start_data_request(ctx, d.req(), size, &group);
  if (!reactor && on_ring && fuse_req_ring_payload(d.req(), &payload, &payload_size) != 0) payload = nullptr;
  std::optional<HeldReply> held_reply;
  HeldReply* held = !reactor && on_ring ? &held_reply.emplace(payload) : nullptr;
  const Kiocb iocb{.ki_pos = uint64_t(off), .ki_poll = poll ? &group : nullptr,
                   .ki_buf = reinterpret_cast<uint8_t*>(payload), .ki_buf_size = payload_size};
  // Captured field by field so that the bools pack (the callback's room is 48 bytes).
  ctx->fs->read_async(ino, iocb, size, [ctx, who = d.who, t, held, receiver = pthread_self(), hot = d.hot,
                                                 on_ring, poll](ssize_t n, const uint8_t* data) {
    const DataRequest d{ctx, who, hot};
    end_data_request(d.ctx, poll);
    if (held) return held->finish(n, data);
    count_reply_elsewhere(d.ctx, on_ring, receiver);
    reply_read(d, t, n, data);
    end_callback(d.ctx);
  });
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    const uint8_t* data;
    const ssize_t n = held->wait(&data);
    reply_read(d, t, n, data);
    end_callback(ctx);
  }
}

void write_data(const DataRequest& d, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                const fuse_file_info* fi, bool keep_setid) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_receive, d.who, FUSE_WRITE, size, ino, off);
  const StageToken t = stage_request_received();
  FuseContext* ctx = d.ctx;
  note_transport(ctx, d.req());
  const bool reactor = FuseReactor::current_request(nullptr, nullptr, nullptr);
  const bool on_ring = reactor || fuse_req_on_ring(d.req());  // req is gone once answered
  // O_DSYNC / O_SYNC, from the open or this write's RWF_DSYNC (fuse_write_flags()): on a
  // direct I/O handle the kernel sends no fsync after the write, so the reply waits until the
  // data is durable. On a cached handle the fsync it sends after the write does that.
  if ((fi->flags & O_DSYNC) && fi->fh == FH_DIRECT_IO && !fi->writepage) {
    ctx->data_requests.fetch_add(1, std::memory_order_relaxed);
    const Kiocb iocb{.ki_pos = uint64_t(off), .ki_flags = keep_setid ? 0u : unsigned(IOCB_KILL_SUIDGID)};
    const ssize_t n = ctx->fs->write_durable(ino, iocb, size, buf, (fi->flags & O_SYNC) != O_SYNC);
    ctx->data_requests.fetch_sub(1, std::memory_order_relaxed);
    return reply_write(d, t, n);
  }
  BlkPollGroup group;
  const bool poll = start_data_request(ctx, d.req(), size, &group);
  std::optional<HeldReply> held_reply;  // libfuse's ring: see read_data
  HeldReply* held = on_ring && !reactor ? &held_reply.emplace() : nullptr;
  Kiocb iocb{.ki_pos = uint64_t(off), .ki_poll = poll ? &group : nullptr};
  if (!fi->writepage && !keep_setid) iocb.ki_flags |= IOCB_KILL_SUIDGID;  // writeback: the kernel has seen to the bits
  // The data stays put until the reply: the ring's payload buffer is the request's until
  // then, and a /dev/fuse worker's buffer (page-aligned payload: libfuse's buf_alloc) is
  // not reused before this handler returns, which a polled write waits for.
  if (on_ring || poll) iocb.ki_flags |= IOCB_BUF_STAYS;
  ctx->fs->write_async(ino, iocb, size, buf, [ctx, who = d.who, t, held, receiver = pthread_self(),
                                              hot = d.hot, on_ring, poll](ssize_t n) {
    const DataRequest d{ctx, who, hot};
    end_data_request(d.ctx, poll);
    if (held) return held->finish(n);
    count_reply_elsewhere(d.ctx, on_ring, receiver);
    reply_write(d, t, n);
    end_callback(d.ctx);
  });
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    reply_write(d, t, held->wait());
    end_callback(ctx);
  }
}

// A READ or WRITE straight from the reactor's ring entry: what libfuse's do_read / _do_write
// would pass on (fuse_lowlevel.c, 3.18), without its request allocation, session lock and
// decoding.
void fuse_hot_request(void* userdata, const FuseReactor::HotRequest& r) {
  const DataRequest d{static_cast<FuseContext*>(userdata), r.entry, true};
  if (r.in->opcode == FUSE_READ) {
    const auto* a = static_cast<const fuse_read_in*>(r.arg);
    return read_data(d, r.in->nodeid, a->size, off_t(a->offset));
  }
  const auto* a = static_cast<const fuse_write_in*>(r.arg);
  fuse_file_info fi{};
  fi.fh = a->fh;
  fi.writepage = (a->write_flags & FUSE_WRITE_CACHE) != 0;
  fi.lock_owner = a->lock_owner;
  fi.flags = int(a->flags);
  write_data(d, r.in->nodeid, r.payload, a->size, off_t(a->offset), &fi, r.in->uid == 0);  // may_keep_setid()
}

void fuse_ring_batch_end(void*) {
  if (current_plug() == &tls_batch_plug) blk_finish_plug(&tls_batch_plug);
}


// An I/O the device never answers ends by the driver's timeout, so this ends too.
void wait_for_callbacks(const FuseContext& ctx) {
  while (ctx.callbacks_pending.load(std::memory_order_acquire) != 0) usleep(200);
}

}  // namespace biofs
