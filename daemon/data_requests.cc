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
#include "page_dropper.h"

namespace biofs {

namespace {

// Reads and writes reply from the completion path: the thread that handled the request submits
// the bios and goes back for the next one, so a few threads keep many I/Os in flight. Over the
// reactor's ring the reply is made on the reactor thread itself where it covers the device's
// queue (blockcore/blk_cover.h), else posted to it (fuse_reactor.h). The
// reply ends the request's sampled per-stage trace (blockcore/stage_clock.h).
void count_reply_elsewhere(FuseContext* ctx, bool on_ring, pthread_t receiver) {
  if (on_ring && !pthread_equal(pthread_self(), receiver))
    ctx->io.replies_elsewhere.fetch_add(1, std::memory_order_relaxed);
}

// The stats' transport: the one the latest read or write came over.
void note_transport(FuseContext* ctx, const RequestTransport* via) {
  if (ctx->io.transport.load(std::memory_order_relaxed) != via) ctx->io.transport.store(via, std::memory_order_relaxed);
}

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
// (its transport's receiver_free() says when); then the I/O is polled in `group` until it has ended.
// Otherwise it is counted as asynchronous until end_data_request().
bool decide_data_request(const DataRequest& d, size_t size, BlkPollGroup* group) {
  FuseContext* ctx = d.ctx;
  ctx->io.callbacks_pending.fetch_add(1, std::memory_order_relaxed);
  const unsigned others = ctx->io.data_requests.fetch_add(1, std::memory_order_relaxed);
  const bool receiver_free = d.via->receiver_free(*ctx, others, d.waiting);
  if (d.via->plugs_batch() && ctx->switches.ring_plug.load(std::memory_order_relaxed)) plug_ring_batch(d.waiting);
  if (size > FuseContext::POLL_MAX_BYTES || !receiver_free) return false;
  if (!blk_poll_group_start(group, ctx->fs->io().bdev()->queue)) return false;
  ctx->io.polled.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool start_data_request(const DataRequest& d, size_t size, BlkPollGroup* group) {
  const bool poll = decide_data_request(d, size, group);
  if (!poll) d.ctx->io.async_requests.fetch_add(1, std::memory_order_relaxed);
  return poll;
}

void end_data_request(FuseContext* ctx, bool polled) {
  if (!polled) ctx->io.async_requests.fetch_sub(1, std::memory_order_relaxed);
  ctx->io.data_requests.fetch_sub(1, std::memory_order_relaxed);
}

// The last thing a read or write callback does: `req` may be gone (answered), ctx is not.
void end_callback(FuseContext* ctx) { ctx->io.callbacks_pending.fetch_sub(1, std::memory_order_release); }

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
void reply_read(const RequestTransport& via, void* who, StageToken t, ssize_t n, const uint8_t* data) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_reply, who, n);
  via.reply_read(who, n, data);
  stage_request_reply(t);
}
void reply_write(const RequestTransport& via, void* who, StageToken t, ssize_t n) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_reply, who, n);
  via.reply_write(who, n);
  stage_request_reply(t);
}

// A direct write's ticket (cached_opens.h), 0 for any other write.
uint32_t direct_write_ticket(FuseContext* ctx, fuse_ino_t ino, const fuse_file_info* fi) {
  return fi->fh == FH_DIRECT_IO && !fi->writepage ? ctx->cached_opens.ticket(ino) : 0;
}

// Where a page-cache handle was open while a direct write was in flight, a READ may have left
// the file's old data in the kernel's pages: they go before `reply` runs, off this thread
// (page_dropper.h); otherwise `reply` runs here, with nothing allocated.
template <typename Reply>
void reply_after_drop(FuseContext* ctx, fuse_ino_t ino, uint32_t ticket, Reply&& reply) {
  PageDropper* dropper = ctx->attached.page_dropper;
  if (ticket == 0 || !dropper || !ctx->cached_opens.may_be_stale(ino, ticket)) [[likely]]
    return reply();
  dropper->drop_then(ino, std::forward<Reply>(reply));
}

// libfuse's ring takes no reply from another thread (HeldReply): there the reply does not wait for the drop.
void drop_after_reply(FuseContext* ctx, fuse_ino_t ino, uint32_t ticket) {
  reply_after_drop(ctx, ino, ticket, [] {});
}

}  // namespace

void read_data(const DataRequest& d, fuse_ino_t ino, size_t size, off_t off) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_receive, d.who, FUSE_READ, size, ino, off);
  const StageToken t = stage_request_received();
  FuseContext* ctx = d.ctx;
  note_transport(ctx, d.via);
  BlkPollGroup group;
  const bool poll = start_data_request(d, size, &group);
  std::optional<HeldReply> held_reply;
  HeldReply* held = d.via->holds_reply() ? &held_reply.emplace(d.payload) : nullptr;
  // Over io_uring the reply's payload buffer is the request's own (page-aligned) and the reply
  // goes without a copy when the data is already there: the read goes straight into it.
  const Kiocb iocb{.ki_pos = uint64_t(off), .ki_poll = poll ? &group : nullptr,
                   .ki_buf = reinterpret_cast<uint8_t*>(d.payload), .ki_buf_size = d.payload_size};
  // Captured field by field, the transport as its number (the callback's room is 48 bytes).
  ctx->fs->read_async(ino, iocb, size, [ctx, who = d.who, t, held, receiver = pthread_self(), via = d.via->id(),
                                        poll](ssize_t n, const uint8_t* data) {
    end_data_request(ctx, poll);
    if (held) return held->finish(n, data);
    const RequestTransport& transport = RequestTransport::by_id(via);
    count_reply_elsewhere(ctx, transport.on_ring(), receiver);
    reply_read(transport, who, t, n, data);
    end_callback(ctx);
  });
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    const uint8_t* data;
    const ssize_t n = held->wait(&data);
    reply_read(*d.via, d.who, t, n, data);
    end_callback(ctx);
  }
}

void write_data(const DataRequest& d, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                const fuse_file_info* fi, bool keep_setid) {
  if (tracing_on()) [[unlikely]]
    BIOFS_PROBE(fuse, fuse_request_receive, d.who, FUSE_WRITE, size, ino, off);
  const StageToken t = stage_request_received();
  FuseContext* ctx = d.ctx;
  note_transport(ctx, d.via);
  const uint32_t ticket = direct_write_ticket(ctx, ino, fi);
  // O_DSYNC / O_SYNC, from the open or this write's RWF_DSYNC (fuse_write_flags()): on a
  // direct I/O handle the kernel sends no fsync after the write, so the reply waits until the
  // data is durable. On a cached handle the fsync it sends after the write does that.
  if ((fi->flags & O_DSYNC) && fi->fh == FH_DIRECT_IO && !fi->writepage) {
    ctx->io.data_requests.fetch_add(1, std::memory_order_relaxed);
    const Kiocb iocb{.ki_pos = uint64_t(off), .ki_flags = keep_setid ? 0u : unsigned(IOCB_KILL_SUIDGID)};
    const ssize_t n = ctx->fs->write_durable(ino, iocb, size, buf, (fi->flags & O_SYNC) != O_SYNC);
    ctx->io.data_requests.fetch_sub(1, std::memory_order_relaxed);
    const auto reply = [via = d.via, who = d.who, t, n] { reply_write(*via, who, t, n); };
    if (!d.via->holds_reply()) return reply_after_drop(ctx, ino, ticket, reply);
    reply();
    return drop_after_reply(ctx, ino, ticket);
  }
  BlkPollGroup group;
  const bool poll = start_data_request(d, size, &group);
  std::optional<HeldReply> held_reply;  // libfuse's ring: see read_data
  HeldReply* held = d.via->holds_reply() ? &held_reply.emplace() : nullptr;
  Kiocb iocb{.ki_pos = uint64_t(off), .ki_poll = poll ? &group : nullptr};
  if (!fi->writepage && !keep_setid) iocb.ki_flags |= IOCB_KILL_SUIDGID;  // writeback: the kernel has seen to the bits
  // The data stays put until the reply: the ring's payload buffer is the request's until
  // then, and a /dev/fuse worker's buffer (page-aligned payload: libfuse's buf_alloc) is
  // not reused before this handler returns, which a polled write waits for.
  if (d.via->on_ring() || poll) iocb.ki_flags |= IOCB_BUF_STAYS;
  ctx->fs->write_async(ino, iocb, size, buf, [ctx, who = d.who, t, held, receiver = pthread_self(),
                                              via = d.via->id(), poll, ino, ticket](ssize_t n) {
    end_data_request(ctx, poll);
    if (held) {  // libfuse's ring: the handler replies
      drop_after_reply(ctx, ino, ticket);
      return held->finish(n);
    }
    reply_after_drop(ctx, ino, ticket, [=] {
      const RequestTransport& transport = RequestTransport::by_id(via);
      count_reply_elsewhere(ctx, transport.on_ring(), receiver);
      reply_write(transport, who, t, n);
      end_callback(ctx);
    });
  });
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    reply_write(*d.via, d.who, t, held->wait());
    end_callback(ctx);
  }
}

// A READ or WRITE straight from the reactor's ring entry: what libfuse's do_read / _do_write
// would pass on (fuse_lowlevel.c, 3.18), without its request allocation, session lock and
// decoding.
void fuse_hot_request(void* userdata, const FuseReactor::HotRequest& r) {
  const DataRequest d{static_cast<FuseContext*>(userdata), &reactor_hot_transport(), r.entry, r.payload,
                      r.payload_size, r.waiting};
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
  while (ctx.io.callbacks_pending.load(std::memory_order_acquire) != 0) usleep(200);
}

}  // namespace biofs
