#include "request_transport.h"

#include <cstdint>

#include "fuse_ops.h"
#include "fuse_reactor.h"

namespace biofs {

namespace {

// Through libfuse's reply functions: /dev/fuse's writev, libfuse's ring, or the reactor's
// custom writev (fuse_reactor.cc: the entry found by the request's unique).
class LibfuseReplies : public RequestTransport {
 public:
  using RequestTransport::RequestTransport;
  void reply_read(void* who, ssize_t n, const uint8_t* data) const override {
    if (n < 0) fuse_reply_err(static_cast<fuse_req_t>(who), int(-n));
    else fuse_reply_buf(static_cast<fuse_req_t>(who), reinterpret_cast<const char*>(data), size_t(n));
  }
  void reply_write(void* who, ssize_t n) const override {
    if (n < 0) fuse_reply_err(static_cast<fuse_req_t>(who), int(-n));
    else fuse_reply_write(static_cast<fuse_req_t>(who), size_t(n));
  }
};

// A libfuse worker read() the request from /dev/fuse. It may wait for the I/O while another
// worker is free to read the next request: fewer reads and writes are in the daemon than workers.
class DevFuse final : public LibfuseReplies {
 public:
  DevFuse() : LibfuseReplies(0) {}
  const char* name() const override { return "/dev/fuse"; }
  bool on_ring() const override { return false; }
  bool receiver_free(const FuseContext& ctx, unsigned others, int) const override {
    return others + 1 < ctx.settings.threads;
  }
};

// libfuse's own ring thread (fuse_uring=libfuse): it replies itself, so it always waits.
class LibfuseRing final : public LibfuseReplies {
 public:
  LibfuseRing() : LibfuseReplies(1) {}
  const char* name() const override { return "libfuse ring"; }
  bool on_ring() const override { return true; }
  bool holds_reply() const override { return true; }
  bool receiver_free(const FuseContext&, unsigned, int) const override { return true; }
};

// A reactor thread runs a request to completion only when no request waits in its ring behind
// it, nor did behind any of its last 8: a queue that fills now and then is a deep one, and a
// thread that polls holds it up. One bit per recent request of this thread (the history is
// the thread's, as its plug is: each reactor thread serves one ring).
thread_local uint8_t tls_backlog = 0;

bool reactor_receiver_free(unsigned others, int waiting) {
  tls_backlog = uint8_t(tls_backlog << 1 | (waiting > 0));
  return others == 0 && tls_backlog == 0;
}

// The reactor's replies to the READ and WRITE it decoded from the entry: in the entry itself.
class HotReplies : public RequestTransport {
 public:
  using RequestTransport::RequestTransport;
  void reply_read(void* entry, ssize_t n, const uint8_t* data) const override {
    FuseReactor::reply_hot(entry, n < 0 ? int(-n) : 0, data, n < 0 ? 0 : size_t(n));
  }
  void reply_write(void* entry, ssize_t n) const override {
    const fuse_write_out out{uint32_t(n < 0 ? 0 : n), 0};
    FuseReactor::reply_hot(entry, n < 0 ? int(-n) : 0, &out, sizeof(out));
  }
};

// The reactor's ring, whichever decoded the request: libfuse (Replies = LibfuseReplies: the reply
// comes back through the reactor's writev) or the reactor itself (HotReplies).
template <class Replies>
class ReactorRing final : public Replies {
 public:
  explicit ReactorRing(uint8_t id) : Replies(id) {}
  const char* name() const override { return "reactor"; }
  bool on_ring() const override { return true; }
  bool plugs_batch() const override { return true; }
  bool receiver_free(const FuseContext&, unsigned others, int waiting) const override {
    return reactor_receiver_free(others, waiting);
  }
};

const DevFuse kDevFuse;
const LibfuseRing kLibfuseRing;
const ReactorRing<LibfuseReplies> kReactorLibfuse(2);
const ReactorRing<HotReplies> kReactorHot(3);
const RequestTransport* const kById[] = {&kDevFuse, &kLibfuseRing, &kReactorLibfuse, &kReactorHot};

}  // namespace

const RequestTransport& RequestTransport::by_id(uint8_t id) { return *kById[id]; }

const RequestTransport& reactor_hot_transport() { return kReactorHot; }

DataRequest libfuse_data_request(FuseContext* ctx, fuse_req_t req) {
  DataRequest d{ctx, &kDevFuse, req};
  // On a reactor thread inside fuse_session_process_buf(): libfuse's request has no room for
  // the ring entry it came in, so the reactor names it for the call (FuseReactor::decoding).
  if (FuseReactor::decoding(&d.payload, &d.payload_size, &d.waiting)) {
    d.via = &kReactorLibfuse;
  } else if (fuse_req_on_ring(req)) {
    d.via = &kLibfuseRing;
    if (fuse_req_ring_payload(req, &d.payload, &d.payload_size) != 0) d.payload = nullptr, d.payload_size = 0;
  }
  return d;
}

}  // namespace biofs
