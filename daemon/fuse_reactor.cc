// The reactor (fuse_reactor.h): the kernel side it talks to is Linux 6.18 fs/fuse/dev_uring.c
// (fuse_uring_register, fuse_uring_commit_fetch, fuse_uring_args_to_ring, fuse_uring_copy_from_ring).
#include "fuse_reactor.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "blockcore/blk_cover.h"
#include "fuse_compat.h"
#include "fuse_uring_uapi.h"

namespace biofs {

using namespace kuapi;

namespace {

struct Queue;

// One ring entry: the kernel's header buffer and, behind a page of room for the request's
// fuse_in_header and opcode argument, its payload buffer (page-aligned).
struct Entry {
  Queue* q = nullptr;
  fuse_uring_req_header* hdr = nullptr;
  char* area = nullptr;  // kRoom bytes, then the payload
  char* payload = nullptr;
  size_t payload_size = 0;
  iovec iov[2]{};
  uint64_t commit_id = 0;
  Entry* next_posted = nullptr;  // in its queue's list of replies posted from other threads
};

constexpr size_t kRoom = 4096;
constexpr uint64_t kWakeTag = 1;    // user_data of the eventfd poll; entries are pointers
constexpr uint64_t kDeviceTag = 2;  // user_data of the poll of the covered queue's completions

thread_local Queue* tls_queue = nullptr;  // the reactor thread's own queue
// The request a reactor thread has handed to libfuse, for the length of that call: libfuse's
// request has no room for it (FuseReactor::decoding).
thread_local Entry* tls_decoding = nullptr;
thread_local int tls_decoding_waiting = 0;  // completions behind it in the batch

}  // namespace

struct FuseReactor::Impl {
  fuse_session* se = nullptr;
  int fd = -1;
  Config cfg;
  std::vector<std::unique_ptr<Queue>> queues;
  // FUSE_INIT, seen on its way in and out through the custom io.
  std::atomic<uint64_t> init_unique{0};
  std::atomic<bool> kernel_offers{false};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> posted{0};
  std::atomic<unsigned> covering{0};
  std::atomic<uint64_t> fixed_buffers{0};  // entries' buffers registered with their rings
  mutable std::mutex err_mu;
  std::string err;
  std::string fixed_err;  // why a ring has no fixed buffers
  // Requests handed to libfuse and not yet answered, by unique: where a reply goes.
  struct Shard {
    std::mutex mu;
    std::unordered_map<uint64_t, Entry*> map;
  };
  std::array<Shard, 64> inflight;

  void set_error(const std::string& why) {
    std::lock_guard<std::mutex> g(err_mu);
    if (err.empty()) err = why;
  }
  void set_fixed_error(const std::string& why) {
    std::lock_guard<std::mutex> g(err_mu);
    if (fixed_err.empty()) fixed_err = why;
  }
  Shard& shard(uint64_t unique) { return inflight[unique % inflight.size()]; }
  void track(Entry* e, uint64_t unique) {
    Shard& s = shard(unique);
    std::lock_guard<std::mutex> g(s.mu);
    s.map[unique] = e;
  }
  Entry* untrack(uint64_t unique) {
    Shard& s = shard(unique);
    std::lock_guard<std::mutex> g(s.mu);
    auto it = s.map.find(unique);
    if (it == s.map.end()) return nullptr;
    Entry* e = it->second;
    s.map.erase(it);
    return e;
  }
  bool start_queues(size_t payload_size);
  void stop_queues();
  uint64_t sum(std::atomic<uint64_t> Queue::*counter) const;  // over the queues
};

namespace {

FuseReactor::Impl* g_reactor = nullptr;  // the custom io's userdata is the session's (FuseContext)

// The kernel has one queue per possible CPU (num_possible_cpus()).
unsigned possible_cpus() {
  unsigned last = 0;
  if (FILE* f = fopen("/sys/devices/system/cpu/possible", "r")) {
    unsigned a = 0, b = 0;
    char sep = 0;
    const int n = fscanf(f, "%u%c%u", &a, &sep, &b);
    fclose(f);
    if (n >= 1) last = (n == 3 && sep == '-') ? b : a;
    return last + 1;
  }
  return unsigned(sysconf(_SC_NPROCESSORS_CONF));
}

struct Queue {
  FuseReactor::Impl* r = nullptr;
  unsigned qid = 0;
  io_uring ring{};
  bool ring_ok = false;
  int efd = -1;
  uint64_t efd_value = 0;
  std::vector<Entry> entries;
  std::atomic<Entry*> posted{nullptr};
  std::thread thread;
  unsigned live = 0;  // entries the kernel has not ended
  // For the stats: written by the queue's thread alone (no locked add per request), read by any.
  std::atomic<uint64_t> requests{0}, hot_requests{0}, device_reaps{0};
  static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  ~Queue() {
    for (Entry& e : entries) {
      free(e.hdr);
      free(e.area);
    }
    if (efd >= 0) close(efd);
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring);
    if (!s) {  // cannot happen: the SQ holds an entry for every command we may have out
      io_uring_submit(&ring);
      s = io_uring_get_sqe(&ring);
    }
    return s;
  }

  void prep_cmd(Entry* e, uint32_t op) {
    io_uring_sqe* s = sqe();
    io_uring_prep_rw(IORING_OP_URING_CMD, s, r->fd, nullptr, 0, 0);
    s->cmd_op = op;
    if (op == FUSE_IO_URING_CMD_REGISTER) {
      s->addr = uint64_t(uintptr_t(e->iov));
      s->len = 2;
    }
    // The command area: the second half of the SQE128, from sqe->cmd on.
    fuse_uring_cmd_req req{};
    req.commit_id = op == FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
    req.qid = uint16_t(qid);
    char* area = reinterpret_cast<char*>(s) + offsetof(io_uring_sqe, cmd);
    std::memset(area, 0, 80);
    std::memcpy(area, &req, sizeof(req));
    io_uring_sqe_set_data64(s, uint64_t(uintptr_t(e)));
  }

  // A multishot poll of the eventfd: a completion each time a post makes it readable.
  void arm_wake() {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_multishot(s, efd, POLLIN);
    io_uring_sqe_set_data64(s, kWakeTag);
  }

  // A multishot poll of the covered hardware queue's completion descriptor (blk_cover.h).
  void arm_device_poll() {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_multishot(s, blk_cover_fd(), POLLIN);
    io_uring_sqe_set_data64(s, kDeviceTag);
  }

  // Covers this CPU's hardware queue of the device, if the reactor runs on that CPU and the
  // driver allows it.
  bool cover_device_queue() {
    RequestQueue* dq = r->cfg.device_queue;
    if (!dq || sched_getcpu() != int(qid) || !blk_cover_claim(dq->map_queue(0))) return false;
    r->covering.fetch_add(1, std::memory_order_relaxed);
    arm_device_poll();
    return true;
  }

  void wake() {
    const uint64_t one = 1;
    if (write(efd, &one, sizeof(one)) < 0) {}
  }

  // A reply made on another thread: the reactor commits it.
  void post(Entry* e) {
    Entry* head = posted.load(std::memory_order_relaxed);
    do e->next_posted = head;
    while (!posted.compare_exchange_weak(head, e, std::memory_order_release, std::memory_order_relaxed));
    wake();
  }

  void commit_posted() {
    for (Entry* e = posted.exchange(nullptr, std::memory_order_acquire); e;) {
      Entry* next = e->next_posted;
      prep_cmd(e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
      e = next;
    }
  }

  bool create(size_t payload_size, unsigned depth);
  void register_fixed_buffers(size_t payload_size);
  void run();
  void handle(Entry* e, int waiting);
  bool hot(Entry* e, const fuse_in_header* in, uint32_t payload_sz, int waiting);
};

bool Queue::create(size_t payload_size, unsigned depth) {
  efd = eventfd(0, EFD_CLOEXEC);
  if (efd < 0) return false;
  io_uring_params p{};
  p.flags = IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(depth + 2, &ring, &p) < 0) {
    p = io_uring_params{};
    p.flags = IORING_SETUP_SQE128;
    if (io_uring_queue_init_params(depth + 2, &ring, &p) < 0) return false;
  }
  ring_ok = true;
  entries.resize(depth);
  for (Entry& e : entries) {
    e.q = this;
    e.hdr = static_cast<fuse_uring_req_header*>(aligned_alloc(64, 320));
    e.area = static_cast<char*>(aligned_alloc(4096, kRoom + payload_size));
    if (!e.hdr || !e.area) return false;
    std::memset(e.hdr, 0, sizeof(*e.hdr));
    e.payload = e.area + kRoom;
    e.payload_size = payload_size;
    e.iov[0] = {e.hdr, sizeof(fuse_uring_req_header)};
    e.iov[1] = {e.payload, payload_size};
  }
  register_fixed_buffers(payload_size);
  return true;
}

// Each entry's area (the room in front and the payload) registered with the ring as fixed
// buffer i, entry i: what kernel 7.3's FUSE buffer pool and READ_FIXED/WRITE_FIXED of the
// device's commands on this ring will name by index (daemon/README.md, "Zero copy"). The
// kernel pins the pages, counted against RLIMIT_MEMLOCK unless CAP_IPC_LOCK: where that does
// not allow it the ring runs without them, and the stats say why.
void Queue::register_fixed_buffers(size_t payload_size) {
  std::vector<iovec> bufs;
  for (Entry& e : entries) bufs.push_back({e.area, kRoom + payload_size});
  const int rc = io_uring_register_buffers(&ring, bufs.data(), unsigned(bufs.size()));
  if (rc == 0) r->fixed_buffers.fetch_add(bufs.size(), std::memory_order_relaxed);
  else r->set_fixed_error(std::string("io_uring_register_buffers: ") + strerror(-rc));
}

void Queue::run() {
  tls_queue = this;
  char name[16];
  snprintf(name, sizeof(name), "fuse-reactor-%u", qid);
  pthread_setname_np(pthread_self(), name);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(qid, &set);
  sched_setaffinity(0, sizeof(set), &set);  // an offline CPU's queue runs anywhere
  if (r->cfg.sched_idle) {
    sched_param sp{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
      r->set_error("the FUSE reactor: cannot put the reactor threads in SCHED_IDLE");
  }
  uint64_t go = 0;
  if (read(efd, &go, sizeof(go)) != sizeof(go) || r->stopping.load()) return;
  // From here the ring polls the eventfd and the thread reads it without blocking.
  fcntl(efd, F_SETFL, fcntl(efd, F_GETFL) | O_NONBLOCK);
  for (Entry& e : entries) prep_cmd(&e, FUSE_IO_URING_CMD_REGISTER);
  live = unsigned(entries.size());
  arm_wake();
  const bool covers = cover_device_queue();
  io_uring_cqe* batch[64];
  while (live > 0 && !r->stopping.load(std::memory_order_relaxed)) {
    const int ret = io_uring_submit_and_wait(&ring, 1);
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
      r->set_error(std::string("the FUSE reactor: io_uring_enter: ") + strerror(-ret));
      break;
    }
    const unsigned n = io_uring_peek_batch_cqe(&ring, batch, 64);
    bool device_ready = false;  // the covered queue has completions
    for (unsigned i = 0; i < n; i++) {
      const uint64_t tag = io_uring_cqe_get_data64(batch[i]);
      const int res = batch[i]->res;
      if (tag == kDeviceTag) {  // reaped below, after the batch
        device_ready = true;
        if (!(batch[i]->flags & IORING_CQE_F_MORE)) arm_device_poll();
        continue;
      }
      if (tag == kWakeTag) {
        if (read(efd, &efd_value, sizeof(efd_value)) < 0) {}  // reset it (EAGAIN: already)
        commit_posted();
        if (!(batch[i]->flags & IORING_CQE_F_MORE)) arm_wake();  // the poll ended: again
        continue;
      }
      Entry* e = reinterpret_cast<Entry*>(uintptr_t(tag));
      if (res < 0) {  // the connection is going (-ENOTCONN), or the kernel refused the entry
        live--;
        if (res != -ENOTCONN && res != -ECONNABORTED && res != -ECANCELED)
          r->set_error(std::string("the FUSE reactor: the kernel ended a ring entry: ") + strerror(-res));
        continue;
      }
      handle(e, int(n - i - 1));  // the rest of the batch waits behind it
    }
    io_uring_cq_advance(&ring, n);
    if (r->cfg.batch_end) r->cfg.batch_end(r->cfg.userdata);
    if (covers) {  // back where it waits: cover the queue again and reap what it finished
      blk_cover_resume();
      if (device_ready)
        if (const int reaped = blk_cover_reap()) bump(device_reaps, uint64_t(reaped));
    }
  }
  blk_cover_release();
  tls_queue = nullptr;
}

// A READ or WRITE goes to the hot handler straight from the entry (Config::hot_request); the
// rest is laid out as /dev/fuse delivers it, in front of the payload, for libfuse to decode; its
// handler (or a later thread) replies through reactor_writev().
void Queue::handle(Entry* e, int waiting) {
  const auto* in = reinterpret_cast<const fuse_in_header*>(e->hdr->in_out);
  const uint32_t payload_sz = e->hdr->ring_ent_in_out.payload_sz;
  e->commit_id = e->hdr->ring_ent_in_out.commit_id;
  bump(requests);
  const size_t head = sizeof(fuse_in_header);
  if (in->len < head + payload_sz || in->len - head - payload_sz > FUSE_URING_OP_IN_OUT_SZ ||
      payload_sz > e->payload_size) {
    FuseReactor::reply_hot(e, EIO, nullptr, 0);
    return;
  }
  if (in->opcode == FUSE_SYNCFS && r->cfg.syncfs) {  // libfuse would answer ENOSYS (syncfs.h)
    FuseReactor::reply_hot(e, -r->cfg.syncfs(r->cfg.userdata), nullptr, 0);
    return;
  }
  if (hot(e, in, payload_sz, waiting)) {
    bump(hot_requests);
  } else {
    const size_t op_sz = in->len - head - payload_sz;
    char* start = e->payload - head - op_sz;
    std::memcpy(start, in, head);
    std::memcpy(start + head, e->hdr->op_in, op_sz);
    r->track(e, in->unique);
    fuse_buf buf{};
    buf.size = in->len;
    buf.mem = start;
    buf.fd = -1;
    tls_decoding = e, tls_decoding_waiting = waiting;
    fuse_session_process_buf(r->se, &buf);
    tls_decoding = nullptr;
  }
}

// Hands a READ or WRITE to the hot handler, when there is one and the request is whole (a
// write's data all in the payload, a read's room there); false: libfuse takes it.
bool Queue::hot(Entry* e, const fuse_in_header* in, uint32_t payload_sz, int waiting) {
  if (!r->cfg.hot_request) return false;
  if (r->cfg.hot_enabled && !r->cfg.hot_enabled->load(std::memory_order_relaxed)) return false;
  if (in->opcode == FUSE_READ) {
    if (reinterpret_cast<const fuse_read_in*>(e->hdr->op_in)->size > e->payload_size) return false;
  } else if (in->opcode == FUSE_WRITE) {
    if (reinterpret_cast<const fuse_write_in*>(e->hdr->op_in)->size != payload_sz) return false;
  } else {
    return false;
  }
  r->cfg.hot_request(r->cfg.userdata, FuseReactor::HotRequest{in, e->hdr->op_in, e->payload, e->payload_size, waiting, e});
  return true;
}

// Commits the reply now in the entry: at once on the entry's own reactor thread, else posted to it.
void commit_reply(Entry* e) {
  if (tls_queue == e->q) {
    e->q->prep_cmd(e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
  } else {
    e->q->r->posted.fetch_add(1, std::memory_order_relaxed);
    e->q->post(e);
  }
}

ssize_t reactor_read(int fd, void* buf, size_t len, void* userdata) {
  FuseReactor::Impl* r = g_reactor;
  const ssize_t n = read_answering_syncfs(fd, buf, len, r ? r->cfg.syncfs : nullptr, userdata);
  if (r && n >= ssize_t(sizeof(fuse_in_header) + sizeof(fuse_init_in))) {
    const auto* in = static_cast<const fuse_in_header*>(buf);
    if (in->opcode == FUSE_INIT) {
      const auto* init = reinterpret_cast<const fuse_init_in*>(in + 1);
      const bool ext = init->flags & FUSE_INIT_EXT_FLAG;
      r->kernel_offers.store(ext && (init->flags2 & uint32_t(FUSE_OVER_IO_URING >> 32)));
      r->init_unique.store(in->unique);
      if (!r->kernel_offers.load())
        r->set_error("the FUSE reactor: the kernel did not offer FUSE-over-io_uring at INIT: using /dev/fuse");
    }
  }
  return n;
}

// The INIT reply: FUSE_OVER_IO_URING added when the kernel offered it and every queue is
// set up, and the queues told to register once the kernel has taken the reply.
ssize_t reply_init(FuseReactor::Impl* r, int fd, const iovec* iov, int count) {
  char msg[512];
  size_t len = 0;
  for (int i = 0; i < count; i++) {
    if (len + iov[i].iov_len > sizeof(msg)) return writev(fd, iov, count);
    std::memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
    len += iov[i].iov_len;
  }
  auto* out = reinterpret_cast<fuse_out_header*>(msg);
  const size_t flags2_end = sizeof(fuse_out_header) + offsetof(fuse_init_out, flags2) + sizeof(uint32_t);
  bool ring = false;
  if (out->error == 0 && len >= flags2_end && r->kernel_offers.load()) {
    auto* init = reinterpret_cast<fuse_init_out*>(out + 1);
    const unsigned pages = (init->flags & FUSE_MAX_PAGES_FLAG) ? std::max<unsigned>(init->max_pages, 1) : 32;
    size_t payload = std::max<size_t>({8192, init->max_write, size_t(pages) * 4096});
    payload = (payload + 4095) & ~size_t(4095);
    if (r->start_queues(payload)) {
      init->flags |= FUSE_INIT_EXT_FLAG;
      init->flags2 |= uint32_t(FUSE_OVER_IO_URING >> 32);
      ring = true;
    }
  }
  const ssize_t n = write(fd, msg, len);
  const int saved = errno;
  if (ring) {
    if (n == ssize_t(len)) {
      for (auto& q : r->queues) q->wake();  // go: register
    } else {
      r->stop_queues();
    }
  }
  errno = saved;
  return n;
}

ssize_t reactor_writev(int fd, iovec* iov, int count, void*) {
  FuseReactor::Impl* r = g_reactor;
  if (!r || count < 1 || iov[0].iov_len != sizeof(fuse_out_header)) return writev(fd, iov, count);
  const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (out->unique != 0 && out->unique == r->init_unique.load(std::memory_order_relaxed)) {
    r->init_unique.store(0);
    return reply_init(r, fd, iov, count);
  }
  Entry* e = out->unique ? r->untrack(out->unique) : nullptr;
  if (!e) return writev(fd, iov, count);  // a /dev/fuse request's reply
  // Into the entry (fuse_uring_copy_from_ring reads the out header and payload_sz bytes).
  std::memcpy(e->hdr->in_out, out, sizeof(fuse_out_header));
  size_t total = 0;
  for (int i = 1; i < count; i++) {
    const size_t n = iov[i].iov_len;
    if (total + n > e->payload_size) {  // cannot be: libfuse replies within max_write
      auto* h = reinterpret_cast<fuse_out_header*>(e->hdr->in_out);
      h->error = -EIO;
      total = 0;
      break;
    }
    if (iov[i].iov_base != e->payload + total) std::memmove(e->payload + total, iov[i].iov_base, n);
    total += n;
  }
  e->hdr->ring_ent_in_out.payload_sz = uint32_t(total);
  commit_reply(e);
  return ssize_t(sizeof(fuse_out_header) + total);
}

}  // namespace

bool FuseReactor::Impl::start_queues(size_t payload_size) {
  const unsigned n = possible_cpus();
  for (unsigned qid = 0; qid < n; qid++) {
    auto q = std::make_unique<Queue>();
    q->r = this;
    q->qid = qid;
    queues.push_back(std::move(q));
  }
  bool ok = true;
  for (auto& q : queues) {
    if (!q->create(payload_size, cfg.depth)) {
      set_error(std::string("the FUSE reactor: cannot set up the ring of queue ") + std::to_string(q->qid) +
                ": " + strerror(errno) + ": using /dev/fuse");
      ok = false;
      break;
    }
  }
  if (ok)
    for (auto& q : queues) q->thread = std::thread([q = q.get()] { q->run(); });
  if (!ok) stop_queues();
  return ok;
}

void FuseReactor::Impl::stop_queues() {
  stopping.store(true);
  for (auto& q : queues)
    if (q->efd >= 0) q->wake();
  for (auto& q : queues)
    if (q->thread.joinable()) q->thread.join();
  for (auto& q : queues)
    if (q->ring_ok) io_uring_queue_exit(&q->ring), q->ring_ok = false;
}

FuseReactor::FuseReactor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FuseReactor::~FuseReactor() {
  stop();
  g_reactor = nullptr;
}

Status FuseReactor::attach(fuse_session* se, int fd, const Config& cfg, std::unique_ptr<FuseReactor>* out) {
  out->reset();
  if (g_reactor) return Status::busy("the FUSE reactor: one reactor per process");
  auto impl = std::make_unique<Impl>();
  impl->se = se;
  impl->fd = fd;
  impl->cfg = cfg;
  fuse_custom_io io{};
  io.read = reactor_read;
  io.writev = reactor_writev;
  g_reactor = impl.get();
  if (int rc = fuse_set_custom_io(se, &io, fd)) {
    g_reactor = nullptr;
    return Status::io_error(std::string("the FUSE reactor: fuse_session_custom_io: ") + strerror(-rc));
  }
  out->reset(new FuseReactor(std::move(impl)));
  return Status();
}

void FuseReactor::stop() {
  if (impl_) impl_->stop_queues();
}

std::string FuseReactor::error() const {
  std::lock_guard<std::mutex> g(impl_->err_mu);
  return impl_->err;
}

bool FuseReactor::decoding(char** payload, size_t* payload_size, int* waiting) {
  Entry* e = tls_decoding;
  if (!e) return false;
  *payload = e->payload, *payload_size = e->payload_size;
  *waiting = tls_decoding_waiting;
  return true;
}

void FuseReactor::reply_hot(void* entry, int error, const void* out, size_t out_bytes) {
  Entry* e = static_cast<Entry*>(entry);
  // Written over the request's fuse_in_header, whose unique sits where the reply's goes.
  static_assert(offsetof(fuse_in_header, unique) == offsetof(fuse_out_header, unique));
  auto* h = reinterpret_cast<fuse_out_header*>(e->hdr->in_out);
  if (error == 0 && out_bytes > e->payload_size) error = EIO;  // cannot be: a read fits its entry
  h->error = -error;
  h->len = uint32_t(sizeof(fuse_out_header) + (error ? 0 : out_bytes));
  if (error) out_bytes = 0;
  if (out_bytes && out != e->payload) std::memmove(e->payload, out, out_bytes);
  e->hdr->ring_ent_in_out.payload_sz = uint32_t(out_bytes);
  commit_reply(e);
}

uint64_t FuseReactor::Impl::sum(std::atomic<uint64_t> Queue::*counter) const {
  uint64_t n = 0;
  for (const auto& q : queues) n += ((*q).*counter).load(std::memory_order_relaxed);
  return n;
}

uint64_t FuseReactor::requests() const { return impl_->sum(&Queue::requests); }
uint64_t FuseReactor::hot_requests() const { return impl_->sum(&Queue::hot_requests); }
uint64_t FuseReactor::replies_posted() const { return impl_->posted.load(std::memory_order_relaxed); }
unsigned FuseReactor::covering() const { return impl_->covering.load(std::memory_order_relaxed); }
uint64_t FuseReactor::device_reaps() const { return impl_->sum(&Queue::device_reaps); }
uint64_t FuseReactor::fixed_buffers() const { return impl_->fixed_buffers.load(std::memory_order_relaxed); }
std::string FuseReactor::fixed_buffers_error() const {
  std::lock_guard<std::mutex> g(impl_->err_mu);
  return impl_->fixed_err;
}

}  // namespace biofs
