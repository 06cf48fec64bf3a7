// biofs's own FUSE-over-io_uring server side (fuse_uring=on; auto takes it), on the kernel's interface
// (Linux 6.14+ fs/fuse/dev_uring.c; fuse_uring_uapi.h) and liburing, with any libfuse from
// 3.14 on, unpatched.
//
// libfuse keeps what it does well: the mount, the session, FUSE_INIT over /dev/fuse, and the
// decoding and replies of every request but READ and WRITE, which the reactor hands straight
// from the entry to Config::hot_request (answered with reply_hot()). The reactor owns the ring side: one
// thread per possible CPU (the kernel's queue id is the CPU a request was made on), each with
// its own io_uring holding that queue's entries. A request arrives in an entry's header and
// payload buffers; the reactor lays the fuse_in_header and the opcode's argument down in front
// of the payload, so the request reads as /dev/fuse would deliver it with a write's data where
// the kernel put it, and hands it to fuse_session_process_buf(). libfuse's reply comes back
// through the session's custom writev: into the entry, and back to the kernel with
// COMMIT_AND_FETCH by the entry's own reactor (replied on that thread: prepared at once; from
// another thread: posted to the reactor, which an eventfd in its ring wakes).
//
// Each reactor covers the completions of its CPU's hardware queue of the block device
// (blockcore/blk_cover.h): its ring polls the driver's completion descriptor, and the reactor
// reaps the queue after each batch, so a read's completion, its reply and the commit run on
// the thread that took the request, and the driver's completion thread stands down while the
// reactor runs or waits in its ring.
//
// The INIT reply goes out through the same writev: the reactor adds FUSE_OVER_IO_URING to it
// when the kernel offered it, and starts the threads once the kernel has taken it. Forgets and
// interrupts still come through /dev/fuse, to the session loop's workers.
#pragma once

#include "fuse_compat.h"
#include "fuse_uring_uapi.h"
#include "syncfs.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/status.h"

namespace biofs {

class RequestQueue;

class FuseReactor {
 public:
  // A READ or WRITE as the kernel put it in a ring entry (fuse_uring_args_to_ring).
  struct HotRequest {
    const fuse_in_header* in;  // opcode FUSE_READ or FUSE_WRITE, nodeid, uid, ...
    const void* arg;           // its fuse_read_in or fuse_write_in
    char* payload;             // a write's data (arg's size bytes), or where a read's data goes
    size_t payload_size;
    int waiting;               // requests behind it in its thread's batch
    void* entry;               // names the request to reply_hot()
  };
  // Answers a hot request, from any thread: `error` a positive errno or 0, and on success the
  // reply's `out_bytes` (a read's data, a fuse_write_out), copied into the payload buffer
  // unless they are there already.
  static void reply_hot(void* entry, int error, const void* out, size_t out_bytes);

  struct Config {
    unsigned depth = 64;  // entries per queue (fuse_uring_qd=)
    // Called on a reactor thread when it has handled a batch of requests (fuse_ring_batch_end).
    void (*batch_end)(void* userdata) = nullptr;
    void* userdata = nullptr;
    // The reactor threads in SCHED_IDLE (fuse_uring_sched=idle|auto): a CPU that runs only its
    // reactor counts as idle, so a woken requester stays on it; the ring guard (ring_guard.h,
    // name prefix "fuse-reactor-") moves a thread kept waiting back to SCHED_OTHER.
    bool sched_idle = false;
    // The block device's queue, whose hardware queue of its CPU each reactor covers where the
    // driver allows (blk_cover.h); nullptr: none.
    RequestQueue* device_queue = nullptr;
    // READ and WRITE decoded by the reactor itself, straight from the ring entry, and answered
    // with reply_hot() (libfuse never sees them); nullptr: libfuse decodes them as the rest.
    void (*hot_request)(void* userdata, const HotRequest& r) = nullptr;
    // While this is false (it may change under I/O: fuse_uring_hot, live), READ and WRITE go to
    // libfuse like every other request. nullptr: always true.
    const std::atomic<bool>* hot_enabled = nullptr;
    // FUSE_SYNCFS, answered by the reactor, from its ring or /dev/fuse (syncfs.h); nullptr:
    // libfuse answers it (ENOSYS).
    SyncFsFn syncfs = nullptr;
  };

  // Takes over the session's I/O (fuse_session_custom_io) on `fd`, the mounted session's
  // /dev/fuse descriptor, the reactor in *out. Ok, or one line saying why it cannot.
  static Status attach(fuse_session* se, int fd, const Config& cfg, std::unique_ptr<FuseReactor>* out);
  ~FuseReactor();

  // Stops the reactor threads and waits for them: after fuse_session_unmount(), before
  // fuse_session_destroy().
  void stop();

  // The line saying why the kernel's requests do not come over the reactor's rings, once that
  // is known ("" while nothing went wrong).
  std::string error() const;

  // On a reactor thread inside the handler of a request the reactor handed to libfuse (not a
  // hot one: HotRequest carries these): the request's payload buffer, where a read's data may
  // go directly (the reply then sends it without a copy), and how many requests wait in this
  // thread's batch behind it. False elsewhere.
  static bool decoding(char** payload, size_t* payload_size, int* waiting);

  // Requests received and replies committed, for the stats.
  uint64_t requests() const;
  uint64_t hot_requests() const;  // of the requests, those decoded without libfuse
  uint64_t replies_posted() const;  // of the replies, those made on another thread and posted
  // Reactors covering a hardware queue of the device, and the requests they reaped there.
  unsigned covering() const;
  uint64_t device_reaps() const;
  // The entries' buffers registered with their rings as fixed buffers, and why not all were.
  uint64_t fixed_buffers() const;
  std::string fixed_buffers_error() const;

  struct Impl;

 private:
  explicit FuseReactor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace biofs
