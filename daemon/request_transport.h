// The transport a read or write came over, and what that decides for it: how it is answered,
// where a read's data may land, whether its thread may wait for the I/O, whether a plug spans
// its batch. Named once where the request is received (the reactor's hot decode, or
// transport_of() in libfuse's op_read / op_write); the data path (data_requests.cc) calls
// through it and never asks which one it is.
//
// Four ways in, one object each:
//   /dev/fuse        a libfuse worker read() the request; it writes the reply
//   libfuse ring     libfuse's own FUSE-over-io_uring thread (fuse_uring=libfuse): the handler
//                    replies itself, on that thread (HeldReply)
//   reactor          biofs's ring (fuse_uring=on, fuse_reactor.h), the request decoded by
//                    libfuse (fuse_uring_hot=off, or a request the reactor does not decode)
//   reactor (hot)    the same ring, READ and WRITE decoded by the reactor from the entry
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fuse_compat.h"

namespace biofs {

struct FuseContext;

class RequestTransport {
 public:
  // The stats' name of the transport ("reactor" for both of the reactor's).
  virtual const char* name() const = 0;
  // Over a FUSE ring: a reply made on a thread other than the receiver's is counted
  // (FuseContext::replies_elsewhere), and the request's buffer stays its own until the reply.
  virtual bool on_ring() const = 0;
  // libfuse's stock ring takes no reply from another thread safely (data_requests.cc,
  // HeldReply): the handler waits for the I/O and replies itself.
  virtual bool holds_reply() const { return false; }
  // Whether the receiving thread may wait for this request's I/O, another being free to take
  // the next request: `others` reads and writes are in the daemon beside it, `waiting`
  // requests wait behind it in its thread's ring batch.
  virtual bool receiver_free(const FuseContext& ctx, unsigned others, int waiting) const = 0;
  // A plug across the ring batch (fuse_uring_plug=): only a ring whose thread ends its batches
  // (FuseReactor::Config::batch_end) has one.
  virtual bool plugs_batch() const { return false; }
  // The reply: `who` names the request (libfuse's fuse_req_t, or the reactor's entry), n its
  // result (bytes, or -errno); a read's data, copied unless it is in the payload already.
  virtual void reply_read(void* who, ssize_t n, const uint8_t* data) const = 0;
  virtual void reply_write(void* who, ssize_t n) const = 0;

  // Each transport's number, so that a completion callback carries one byte, not a pointer
  // (its room is 48 bytes: fs/file_io.h); by_id() gives it back.
  uint8_t id() const { return id_; }
  static const RequestTransport& by_id(uint8_t id);

 protected:
  explicit RequestTransport(uint8_t id) : id_(id) {}
  ~RequestTransport() = default;

 private:
  const uint8_t id_;
};

// A read or write as received: its transport and what came with it.
struct DataRequest {
  FuseContext* ctx;
  const RequestTransport* via;
  void* who;                 // libfuse's fuse_req_t, or the reactor's entry (hot)
  char* payload = nullptr;   // over a ring: the request's own buffer, where a read's data may go
  size_t payload_size = 0;
  int waiting = 0;           // requests behind it in its thread's ring batch (0 where not known)
};

// A read or write libfuse decoded (op_read, op_write): the transport it came over.
DataRequest libfuse_data_request(FuseContext* ctx, fuse_req_t req);

// The reactor's hot requests (fuse_hot_request).
const RequestTransport& reactor_hot_transport();

}  // namespace biofs
