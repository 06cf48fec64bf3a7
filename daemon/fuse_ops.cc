#include "fuse_ops.h"

#include "blockcore/blk_mq.h"
#include "blockcore/blk_poll.h"
#include "blockcore/stage_clock.h"
#include "fuse_compat.h"
#include "fuse_reactor.h"
#include "stats.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace biofs {

namespace {

// libfuse's ring threads (fuse_uring=libfuse) are cancelled when the session loop ends (stock
// 3.18.3's fuse_uring_stop), at whatever cancellation point a handler waits in: a handler
// unwound half done leaves its request unanswered, its I/O's callback writing to a stack frame
// that is gone (HeldReply) and its locks held. As libfuse's /dev/fuse workers handle requests
// with cancellation disabled, a ring thread disables it at its first request, for good: it
// still ends, woken by the eventfd that fuse_uring_stop() writes.
thread_local bool tls_cancel_checked = false;
FuseContext* CTX(fuse_req_t req) {
  if (!tls_cancel_checked) [[unlikely]] {
    tls_cancel_checked = true;
    if (fuse_req_on_ring(req)) pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  }
  return static_cast<FuseContext*>(fuse_req_userdata(req));
}
Filesystem* FS(fuse_req_t req) { return CTX(req)->fs; }

// Whether the caller may keep set-id bits over a write or truncation (CAP_FSETID): libfuse
// passes the uid, not capabilities, so root.
bool may_keep_setid(fuse_req_t req) { return fuse_req_ctx(req)->uid == 0; }

fuse_entry_param entry_of(fuse_req_t req, const struct stat& st) {
  fuse_entry_param e{};
  e.ino = st.st_ino;
  e.attr = st;
  e.attr_timeout = CTX(req)->timeout();
  e.entry_timeout = CTX(req)->timeout();
  return e;
}

void reply_entry(fuse_req_t req, int err, const struct stat& st) {
  if (err) {
    fuse_reply_err(req, -err);
    return;
  }
  const fuse_entry_param e = entry_of(req, st);
  fuse_reply_entry(req, &e);
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* ctx = static_cast<FuseContext*>(userdata);
  conn->max_write = 1u << 20;
  // Asynchronous direct I/O (io_uring, libaio) reaches us as background requests, of which
  // the kernel keeps max_background in flight (12 by default): too few for a depth of 64.
  conn->max_background = ctx->max_background;
  conn->congestion_threshold = ctx->max_background * 3 / 4;
  if (ctx->writeback_cache && fuse_want(conn, FUSE_CAP_WRITEBACK_CACHE)) {
    // Buffered writes stay in the kernel's page cache until writeback, as on ext4. Their WRITE
    // requests come from the flusher and carry no writer, so the kernel clears the set-id bits
    // itself when the write() happens: without FUSE_CAP_HANDLE_KILLPRIV it sends the mode.
    fuse_unwant(conn, FUSE_CAP_HANDLE_KILLPRIV);
  }
  // Kept pages are dropped only for what the kernel cannot see (fuse_ops.h), not whenever a
  // file's mtime moves (libfuse's default FUSE_CAP_AUTO_INVAL_DATA, meant for servers whose
  // files change behind the kernel; nothing changes biofs's but this daemon).
  if (ctx->keep_cache) fuse_unwant(conn, FUSE_CAP_AUTO_INVAL_DATA);
  // POSIX ACLs as ext4 has them: the kernel enforces and caches them, we keep the mode in step
  // and apply a directory's default ACL to what is made in it, so the umask is ours to apply.
  ctx->posix_acl = fuse_offers(conn, FUSE_CAP_POSIX_ACL) && fuse_offers(conn, FUSE_CAP_DONT_MASK);
  if (ctx->posix_acl) fuse_want(conn, FUSE_CAP_POSIX_ACL), fuse_want(conn, FUSE_CAP_DONT_MASK);
  // mmap() of a file opened O_DIRECT (direct_io), which ext4 allows (kernel >= 6.6; libfuse
  // >= 3.16 can ask for it).
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
  ctx->direct_io_mmap = fuse_want(conn, FUSE_CAP_DIRECT_IO_ALLOW_MMAP);
#endif
  // libfuse asks for io_uring by default whenever the session has `-o io_uring`, or the
  // environment's FUSE_URING_ENABLE: only fuse_uring= decides here.
#if BIOFS_FUSE_HAS_URING
  if (!ctx->want_uring) fuse_unwant(conn, FUSE_CAP_OVER_IO_URING);
#endif
}

void op_destroy(void* userdata) {
  auto* ctx = static_cast<FuseContext*>(userdata);
  ctx->fs->sync();
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  struct stat st;
  const int err = FS(req)->lookup(parent, name, &st);
  if (err == -ENOENT && CTX(req)->keep_cache) {
    // A negative entry: the kernel remembers the name is absent (a compiler's include path
    // asks for thousands) until it creates it itself.
    fuse_entry_param e{};
    e.entry_timeout = CTX(req)->timeout();
    return (void)fuse_reply_entry(req, &e);
  }
  reply_entry(req, err, st);
}

// Over io_uring, forgets (and interrupts) still come through /dev/fuse, to a worker of their
// own. Each unlink or evicted inode sends one, and a worker waiting in read() is woken for each:
// a wake-up of the other CPU per unlink. Pausing before the next read lets them gather, so the
// kernel hands over one BATCH_FORGET per pause (forgets need no answer; an interrupt waits at
// most the pause).
constexpr int kForgetGatherUs = 1000;
void gather_forgets(const FuseContext* ctx) {
  if (ctx->want_uring || ctx->reactor) std::this_thread::sleep_for(std::chrono::microseconds(kForgetGatherUs));
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  FuseContext* ctx = CTX(req);
  FS(req)->forget(ino, nlookup);
  fuse_reply_none(req);
  gather_forgets(ctx);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  FuseContext* ctx = CTX(req);
  for (size_t i = 0; i < count; i++) FS(req)->forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
  gather_forgets(ctx);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (int err = FS(req)->getattr(ino, &st)) fuse_reply_err(req, -err);
  else fuse_reply_attr(req, &st, CTX(req)->timeout());
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  struct stat st;
  if (int err = FS(req)->setattr(ino, to_set, *attr, &st, may_keep_setid(req))) fuse_reply_err(req, -err);
  else fuse_reply_attr(req, &st, CTX(req)->timeout());
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string target;
  if (int err = FS(req)->readlink(ino, &target)) fuse_reply_err(req, -err);
  else fuse_reply_readlink(req, target.c_str());
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->mknod(parent, name, mode, c->uid, c->gid, rdev, &st, c->umask);
  reply_entry(req, err, st);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->mkdir(parent, name, mode, c->uid, c->gid, &st, c->umask);
  reply_entry(req, err, st);
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->symlink(parent, name, link, c->uid, c->gid, &st);
  reply_entry(req, err, st);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  struct stat st;
  const int err = FS(req)->link(ino, newparent, newname, &st);
  reply_entry(req, err, st);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, -FS(req)->unlink(parent, name));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, -FS(req)->rmdir(parent, name));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned flags) {
  fuse_reply_err(req, -FS(req)->rename(parent, name, newparent, newname, flags));
}

bool direct_writer(const fuse_file_info* fi) { return (fi->flags & O_DIRECT) && (fi->flags & O_ACCMODE) != O_RDONLY; }

// O_DIRECT: no page cache in the kernel either, every read and write reaches the device.
// Otherwise the kernel keeps the file's pages from earlier opens unless a direct writer may
// have changed the file under them (Filesystem::open).
// fi->fh marks a handle on which the kernel does direct I/O (FOPEN_DIRECT_IO): it sends no
// fsync after an O_DSYNC write there (fuse_direct_write_iter), unlike on a cached handle
// (generic_write_sync after the write), so such a write must itself be durable (op_write).
constexpr uint64_t FH_DIRECT_IO = 1;

void set_caching(fuse_req_t req, fuse_file_info* fi, bool cache_valid) {
  if (fi->flags & O_DIRECT) {
    fi->direct_io = 1;
    fi->fh = FH_DIRECT_IO;
  } else {
    fi->keep_cache = CTX(req)->keep_cache && cache_valid;
  }
}

// libfuse takes FUSE_CAP_ATOMIC_O_TRUNC by default: the kernel then sends O_TRUNC inside OPEN
// (no SETATTR), so open itself truncates, under truncate's rules.
void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  bool cache_valid = false;
  if (int err = FS(req)->open(ino, fi->flags & O_TRUNC, direct_writer(fi), &cache_valid)) {
    fuse_reply_err(req, -err);
    return;
  }
  set_caching(req, fi, cache_valid);
  fuse_reply_open(req, fi);
}

void reply_create(fuse_req_t req, const struct stat& st, fuse_file_info* fi, bool cache_valid) {
  set_caching(req, fi, cache_valid);
  const fuse_entry_param e = entry_of(req, st);
  fuse_reply_create(req, &e, fi);
}

// O_CREAT. Two openers racing on a new name both get here; without O_EXCL the one that loses
// opens what the other made (truncating it on O_TRUNC), as open(2) does.
void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  int err = FS(req)->mknod(parent, name, S_IFREG | (mode & 07777), c->uid, c->gid, 0, &st, c->umask);
  if (err == -EEXIST && !(fi->flags & O_EXCL) && (err = FS(req)->lookup(parent, name, &st)) == 0) {
    if (!S_ISREG(st.st_mode)) {
      FS(req)->forget(st.st_ino, 1);
      return (void)fuse_reply_err(req, S_ISDIR(st.st_mode) ? EISDIR : EEXIST);
    }
    bool cache_valid = false;
    if ((err = FS(req)->open(st.st_ino, fi->flags & O_TRUNC, direct_writer(fi), &cache_valid)) == 0)
      FS(req)->getattr(st.st_ino, &st);
    else FS(req)->forget(st.st_ino, 1);
    if (err) return (void)fuse_reply_err(req, -err);
    return reply_create(req, st, fi, cache_valid);
  }
  if (!err) err = FS(req)->open(st.st_ino, false, direct_writer(fi));
  if (err) return (void)fuse_reply_err(req, -err);
  reply_create(req, st, fi, true);  // a new file: nothing cached yet
}

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
// place that may block flushes it first (sched_submit_work()).
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
    if (ctx->ring_plug) plug_ring_batch(waiting);
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
    if (n > 0 && data != payload_) data_.assign(data, data + n);
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

// A read or write, and who answers it: libfuse's request, or the ring entry of one the reactor
// decoded itself (FuseReactor::HotRequest, fuse_hot_request()).
struct DataRequest {
  FuseContext* ctx;
  void* who;  // libfuse's fuse_req_t, or the reactor's entry (hot)
  bool hot;
  fuse_req_t req() const { return hot ? nullptr : static_cast<fuse_req_t>(who); }
  void* entry() const { return hot ? who : nullptr; }
};

// The reply to a read or write, from its callback or (HeldReply) its handler, ending its trace.
void reply_read(const DataRequest& d, StageToken t, ssize_t n, const uint8_t* data) {
  if (d.hot) FuseReactor::reply_hot(d.who, n < 0 ? int(-n) : 0, data, n < 0 ? 0 : size_t(n));
  else if (n < 0) fuse_reply_err(d.req(), int(-n));
  else fuse_reply_buf(d.req(), reinterpret_cast<const char*>(data), size_t(n));
  stage_request_reply(t);
}
void reply_write(const DataRequest& d, StageToken t, ssize_t n) {
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

void read_data(const DataRequest& d, fuse_ino_t ino, size_t size, off_t off) {
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
  // Captured field by field so that the bools pack (the callback's room is 48 bytes).
  ctx->fs->read_async(ino, uint64_t(off), size, [ctx, who = d.who, t, held, receiver = pthread_self(), hot = d.hot,
                                                 on_ring, poll](ssize_t n, const uint8_t* data) {
    const DataRequest d{ctx, who, hot};
    end_data_request(d.ctx, poll);
    if (held) return held->finish(n, data);
    count_reply_elsewhere(d.ctx, on_ring, receiver);
    reply_read(d, t, n, data);
    end_callback(d.ctx);
  }, reinterpret_cast<uint8_t*>(payload), payload_size);
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    const uint8_t* data;
    const ssize_t n = held->wait(&data);
    reply_read(d, t, n, data);
    end_callback(ctx);
  }
}

// keep_setid: the writer may keep set-id bits (may_keep_setid()).
void write_data(const DataRequest& d, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                const fuse_file_info* fi, bool keep_setid) {
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
    const ssize_t n = ctx->fs->write_durable(ino, uint64_t(off), size, buf, (fi->flags & O_SYNC) != O_SYNC, keep_setid);
    ctx->data_requests.fetch_sub(1, std::memory_order_relaxed);
    return reply_write(d, t, n);
  }
  BlkPollGroup group;
  const bool poll = start_data_request(ctx, d.req(), size, &group);
  std::optional<HeldReply> held_reply;  // libfuse's ring: see read_data
  HeldReply* held = on_ring && !reactor ? &held_reply.emplace() : nullptr;
  ctx->fs->write_async(ino, uint64_t(off), size, buf, [ctx, who = d.who, t, held, receiver = pthread_self(),
                                                       hot = d.hot, on_ring, poll](ssize_t n) {
    const DataRequest d{ctx, who, hot};
    end_data_request(d.ctx, poll);
    if (held) return held->finish(n);
    count_reply_elsewhere(d.ctx, on_ring, receiver);
    reply_write(d, t, n);
    end_callback(d.ctx);
  }, fi->writepage || keep_setid,  // writeback: the kernel has seen to the bits
     // The data stays put until the reply: the ring's payload buffer is the request's until
     // then, and a /dev/fuse worker's buffer (page-aligned payload: libfuse's buf_alloc) is
     // not reused before this handler returns, which a polled write waits for.
     on_ring || poll);
  if (poll) blk_poll_group_wait(&group);
  if (held) {
    reply_write(d, t, held->wait());
    end_callback(ctx);
  }
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  read_data({CTX(req), req, false}, ino, size, off);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  write_data({CTX(req), req, false}, ino, buf, size, off, fi, may_keep_setid(req));
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  FS(req)->release(ino, direct_writer(fi));
  fuse_reply_err(req, 0);
}

// Directory listings are cached by the kernel (and kept across opens) with keep_cache=on: it
// drops them itself when it changes the directory.
void op_opendir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  if (CTX(req)->keep_cache) fi->cache_readdir = fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, -FS(req)->fsync(ino, datasync != 0));
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::vector<char> buf(size);
  size_t used = 0;
  const int err = FS(req)->readdir(ino, uint64_t(off), [&](const std::string& name, uint64_t child, unsigned type,
                                                           uint64_t next) {
    struct stat st{};
    st.st_ino = child;
    st.st_mode = type << 12;
    const size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, off_t(next));
    if (need > size - used) return false;
    used += need;
    return true;
  });
  if (err && used == 0) fuse_reply_err(req, -err);
  else fuse_reply_buf(req, buf.data(), used);
}

// readdirplus: entries with their attributes, each (but "." and "..") counting as a lookup.
// The names are gathered first: the filesystem's readdir holds its lock while it calls back.
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  struct Item {
    std::string name;
    uint64_t ino;
    unsigned type;
    uint64_t next;
  };
  std::vector<Item> items;
  size_t estimate = 0;
  const int err = FS(req)->readdir(ino, uint64_t(off), [&](const std::string& name, uint64_t child, unsigned type,
                                                           uint64_t next) {
    estimate += fuse_add_direntry_plus(req, nullptr, 0, name.c_str(), nullptr, 0);
    if (estimate > size && !items.empty()) return false;
    items.push_back({name, child, type, next});
    return true;
  });
  if (err && items.empty()) {
    fuse_reply_err(req, -err);
    return;
  }
  std::vector<char> buf(size);
  size_t used = 0;
  for (const Item& it : items) {
    fuse_entry_param e{};
    const bool dots = it.name == "." || it.name == "..";
    if (dots) {
      e.attr.st_ino = it.ino;
      e.attr.st_mode = it.type << 12;
    } else {
      if (FS(req)->lookup(ino, it.name, &e.attr) != 0) continue;  // removed meanwhile
      e.ino = e.attr.st_ino;
      e.attr_timeout = CTX(req)->timeout();
      e.entry_timeout = CTX(req)->timeout();
    }
    const size_t need = fuse_add_direntry_plus(req, buf.data() + used, size - used, it.name.c_str(), &e, off_t(it.next));
    if (need > size - used) {
      if (!dots) FS(req)->forget(e.ino, 1);
      break;
    }
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, -FS(req)->fsync(ino, datasync != 0));
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st;
  if (int err = FS(req)->statfs(&st)) fuse_reply_err(req, -err);
  else fuse_reply_statfs(req, &st);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info*) {
  if (off < 0 || len <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  fuse_reply_err(req, -FS(req)->fallocate(ino, mode, uint64_t(off), uint64_t(len)));
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) {
    // SEEK_SET/CUR/END never reach a filesystem that does not ask for them; be explicit anyway.
    fuse_reply_err(req, EINVAL);
    return;
  }
  const int64_t r = off < 0 ? -ENXIO : FS(req)->lseek(ino, uint64_t(off), whence);
  if (r < 0) fuse_reply_err(req, int(-r));
  else fuse_reply_lseek(req, r);
}

// Without FUSE_CAP_POSIX_ACL the kernel would neither enforce ACLs nor keep the mode in step:
// refuse them as a filesystem without ACLs does (cp -a then succeeds without them).
bool acl_refused(fuse_req_t req, const char* name) {
  return !CTX(req)->posix_acl && std::string_view(name).rfind("system.posix_acl_", 0) == 0;
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  if (acl_refused(req, name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  fuse_reply_err(req, -FS(req)->setxattr(ino, name, std::string(value, size), flags));
}

// The size protocol of getxattr/listxattr: size 0 asks for the length; too small is ERANGE.
void reply_xattr(fuse_req_t req, int err, const std::string& v, size_t size) {
  if (err) fuse_reply_err(req, -err);
  else if (size == 0) fuse_reply_xattr(req, v.size());
  else if (size < v.size()) fuse_reply_err(req, ERANGE);
  else fuse_reply_buf(req, v.data(), v.size());
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (is_stats_xattr(ino, name)) {  // fs/stats.h: for root and the mounting user only
    const uid_t uid = fuse_req_ctx(req)->uid;
    if (uid != 0 && uid != CTX(req)->owner) return (void)fuse_reply_err(req, EACCES);
    FuseContext* ctx = CTX(req);
    static const char* const transports[] = {"none yet", "/dev/fuse", "libfuse ring", "reactor"};
    FuseStats fuse{ctx->requested_uring, transports[ctx->transport.load(std::memory_order_relaxed)],
                   ctx->ring_sched_idle ? "idle" : "normal", ctx->replies_elsewhere.load(std::memory_order_relaxed)};
    fuse.polled = ctx->polled.load(std::memory_order_relaxed);
    fuse.libfuse = fuse_pkgversion();
    fuse.direct_io_mmap = ctx->direct_io_mmap;
    fuse.dev_payload_aligned = fuse_dev_payload_aligned();
    fuse.journal_commits = ctx->fs->commits();
    if (const FuseReactor* r = ctx->reactor) {
      fuse.reactor = true;
      fuse.reactor_requests = r->requests();
      fuse.reactor_posted = r->replies_posted();
      fuse.reactor_hot = r->hot_requests();
      fuse.reactor_error = r->error();
      fuse.reactor_fixed_buffers = r->fixed_buffers();
      fuse.reactor_covering = r->covering();
      fuse.reactor_device_reaps = r->device_reaps();
      fuse.reactor_fixed_error = r->fixed_buffers_error();
    }
    if (const RingGuard* g = ctx->ring_guard) {
      fuse.guard_boosts = g->boosts();
      fuse.guard_boosted = g->boosted();
      fuse.guard_io_boosts = g->io_boosts();
    }
    const DeviceStats device = ctx->device_stats ? ctx->device_stats() : DeviceStats{};
    IoContract contract = ctx->contract;
    if (!fuse.reactor_error.empty()) contract.unavailable.push_back(fuse.reactor_error);
    if (!fuse.reactor_fixed_error.empty())
      contract.unavailable.push_back("the reactor's fixed buffers: " + fuse.reactor_fixed_error);
    return reply_xattr(req, 0, stats_json(FS(req)->io(), &fuse, ctx->device_stats ? &device : nullptr, &contract), size);
  }
  std::string v;
  const int err = FS(req)->getxattr(ino, name, &v);
  reply_xattr(req, err, v, size);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  std::string v;
  const int err = FS(req)->listxattr(ino, &v);
  reply_xattr(req, err, v, size);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  fuse_reply_err(req, -FS(req)->removexattr(ino, name));
}

// copy_file_range(2): the daemon copies in 1 MiB steps itself, as bios, instead of the kernel
// falling back to a read and a write through FUSE for every step.
void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info*, fuse_ino_t ino_out,
                        off_t off_out, fuse_file_info*, size_t len, int flags) {
  if (flags) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  constexpr size_t kStep = 1u << 20;
  std::vector<char> buf(std::min(len, kStep));
  size_t done = 0;
  while (done < len) {
    const size_t want = std::min(len - done, kStep);
    const ssize_t n = FS(req)->read(ino_in, uint64_t(off_in) + done, want, buf.data());
    if (n <= 0) {
      if (n < 0 && done == 0) return (void)fuse_reply_err(req, int(-n));
      break;  // end of the source
    }
    const ssize_t w = FS(req)->write(ino_out, uint64_t(off_out) + done, size_t(n), buf.data());
    if (w < 0) {
      if (done == 0) return (void)fuse_reply_err(req, int(-w));
      break;
    }
    done += size_t(w);
    if (size_t(n) < want) break;
  }
  fuse_reply_write(req, done);
}

// lsattr/chattr (FS_IOC_GETFLAGS/SETFLAGS, which the kernel's fileattr code forwards): biofs
// keeps no per-inode attribute flags, so it reads none and accepts only a set of none. Every
// other ioctl is ENOTTY, as on a filesystem that does not know it.
void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info*, unsigned flags,
              const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  if (flags & FUSE_IOCTL_COMPAT) return (void)fuse_reply_err(req, ENOSYS);
  struct stat st;
  if (int err = FS(req)->getattr(ino, &st)) return (void)fuse_reply_err(req, -err);
  // Both forms: the flags word (FS_IOC_[GS]ETFLAGS) and struct fsxattr (FS_IOC_FS[GS]ETXATTR,
  // which the kernel reads first when a flags change comes in).
  const unsigned int get = FS_IOC_GETFLAGS, set = FS_IOC_SETFLAGS;  // truncated to 32 bits, as libfuse passes them
  if (cmd == get && out_bufsz >= sizeof(int)) {
    const int none = 0;
    return (void)fuse_reply_ioctl(req, 0, &none, sizeof(none));
  }
  if (cmd == FS_IOC_FSGETXATTR && out_bufsz >= sizeof(fsxattr)) {
    const fsxattr none{};
    return (void)fuse_reply_ioctl(req, 0, &none, sizeof(none));
  }
  if ((cmd == set && in_bufsz >= sizeof(int)) || (cmd == FS_IOC_FSSETXATTR && in_bufsz >= sizeof(fsxattr))) {
    int want;  // the flags word, or fsx_xflags (the first member)
    std::memcpy(&want, in_buf, sizeof(want));
    if (want != 0) return (void)fuse_reply_err(req, EOPNOTSUPP);
    return (void)fuse_reply_ioctl(req, 0, nullptr, 0);
  }
  fuse_reply_err(req, ENOTTY);
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o{};
  o.init = op_init;
  o.destroy = op_destroy;
  o.lookup = op_lookup;
  o.forget = op_forget;
  o.forget_multi = op_forget_multi;
  o.getattr = op_getattr;
  o.setattr = op_setattr;
  o.readlink = op_readlink;
  o.mknod = op_mknod;
  o.mkdir = op_mkdir;
  o.symlink = op_symlink;
  o.link = op_link;
  o.unlink = op_unlink;
  o.rmdir = op_rmdir;
  o.rename = op_rename;
  o.open = op_open;
  o.create = op_create;
  o.read = op_read;
  o.write = op_write;
  // No flush: close(2) has nothing to wait for here (writes are answered once on the device,
  // writeback is written before the kernel would send FUSE_FLUSH, locks are the kernel's).
  // libfuse answers ENOSYS to the first FUSE_FLUSH and the kernel sends no more (no_flush),
  // one round trip less per close.
  o.release = op_release;
  o.opendir = op_opendir;
  o.fsync = op_fsync;
  o.readdir = op_readdir;
  o.readdirplus = op_readdirplus;
  o.fsyncdir = op_fsyncdir;
  o.statfs = op_statfs;
  o.fallocate = op_fallocate;
  o.lseek = op_lseek;
  o.setxattr = op_setxattr;
  o.getxattr = op_getxattr;
  o.listxattr = op_listxattr;
  o.removexattr = op_removexattr;
  o.copy_file_range = op_copy_file_range;
  o.ioctl = op_ioctl;
  return o;
}

const fuse_lowlevel_ops kOps = make_ops();

}  // namespace

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

const fuse_lowlevel_ops* biofs_fuse_ops() { return &kOps; }

// An I/O the device never answers ends by the driver's timeout, so this ends too.
void wait_for_callbacks(const FuseContext& ctx) {
  while (ctx.callbacks_pending.load(std::memory_order_acquire) != 0) usleep(200);
}

}  // namespace biofs
