// The driver's view of an NVMe controller, in two halves as drivers/nvme/host/nvme.h splits
// struct nvme_ctrl_ops from the queues of pci.c: a transport that answers admin commands and
// creates I/O queues, and an I/O queue that takes a batch of commands and gives back a batch
// of completions. One virtual call per batch, none per command. Two transports implement it:
// uring passthrough to /dev/ngXnY (uring_passthru.h) and the emulated namespace (emu_ns.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "blockcore/blk_mq.h"
#include "lib/status.h"
#include "nvme_cmd.h"
#include "nvme_status.h"

// ThreadSanitizer cannot see the ordering the kernel provides between the thread that submits
// a command through io_uring and the thread that reaps its completion; these mark it.
#if defined(__SANITIZE_THREAD__)
#define BIOFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BIOFS_TSAN 1
#endif
#endif
#ifdef BIOFS_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define NVME_TSAN_RELEASE(p) __tsan_release(p)
#define NVME_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define NVME_TSAN_RELEASE(p) ((void)(p))
#define NVME_TSAN_ACQUIRE(p) ((void)(p))
#endif

namespace biofs {

struct NvmeQueueParams {
  unsigned qid = 1;           // I/O queue id, 1-based
  unsigned depth = 128;       // commands in flight at most (the hardware queue's tags)
  uint32_t nsid = 1;
  unsigned lba_shift = 9;
  uint32_t max_transfer = 0;  // bytes one command moves at most (from MDTS and the driver cap)
  bool polled = false;        // a poll queue (HCTX_TYPE_POLL): only REQ_POLLED I/O, reaped by its submitter
};

// One submission/completion queue pair: here, one io_uring.
class NvmeQueue {
 public:
  explicit NvmeQueue(std::string name) : name_(std::move(name)) {}
  virtual ~NvmeQueue() = default;
  NvmeQueue(const NvmeQueue&) = delete;
  NvmeQueue& operator=(const NvmeQueue&) = delete;

  // Sends the command of every request in `rqs` (built by nvme_setup_cmd()); with `commit`,
  // rings the doorbell once at the end. Requests that find the submission ring full stay in
  // `rqs`, in order. The caller serialises submit() and commit() (the kernel's sq_lock).
  virtual void submit(RqList* rqs, bool commit) = 0;
  virtual void commit() = 0;
  // Reaps what has completed, without blocking: successes go to `iob`, failures to `failed`
  // with the NVMe status in nvme_iod(rq)->status and rq->status set to the mapped block status (the caller ends them with
  // blk_mq_end_request() once it holds no lock: ending runs bio callbacks). Returns the
  // requests completed. The caller serialises reap().
  virtual int reap(IoCompBatch* iob, RqList* failed) = 0;
  // True while commands that completed during submit() (a device that executes them inline,
  // emu_ns.h) wait to be reaped. They post nothing a wait() would see, so the submitter reaps
  // them itself, blocking for the reap's lock if it must (NvmeDriver::reap_own()).
  virtual bool completed_in_submit() const { return false; }
  // Blocks until a completion is ready to reap, a wake(), or REAP_WAIT_MS (uring_util.h).
  // Consumes nothing; may run while another thread reaps.
  virtual void wait() = 0;
  // Makes a wait() that is blocked return. Serialised with submit().
  virtual void wake() = 0;
  // A descriptor that polls readable while completions wait to be reaped, or -1 (a queue
  // reaped only by waiting in it: IOPOLL).
  virtual int completion_fd() const { return -1; }

  const std::string& name() const { return name_; }
  uint64_t errors() const { return errors_; }  // read after the reaper has stopped
  // Commands whose data moved through a buffer registered with the ring (passthrough's
  // IORING_URING_CMD_FIXED); counted under the caller's submit serialisation, read by anyone.
  uint64_t fixed_buffer_cmds() const { return fixed_buffer_cmds_.load(std::memory_order_relaxed); }

 protected:
  // nvme_complete_rq() for both transports: `status` is the NVMe status field.
  void complete(NvmeIod* iod, uint16_t status, IoCompBatch* iob, RqList* failed) {
    Request* rq = nvme_iod_to_rq(iod);
    if (status == NVME_SC_SUCCESS) [[likely]] {
      rq->status = BLK_STS_OK;
      blk_mq_add_to_batch(rq, iob, BLK_STS_OK);
      return;
    }
    fail(iod, status, failed);
  }
  void fail(NvmeIod* iod, uint16_t status, RqList* failed);  // keeps, maps, queues on `failed`

  void count_fixed_buffer_cmd() {
    fixed_buffer_cmds_.store(fixed_buffer_cmds_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::string name_;
  uint64_t errors_ = 0;
  std::atomic<uint64_t> fixed_buffer_cmds_{0};
};

// nvme_ctrl + its namespace, as the driver sees them at start-up.
class NvmeTransport {
 public:
  virtual ~NvmeTransport() = default;
  virtual std::string name() const = 0;  // the device string, for messages
  virtual uint32_t nsid() const = 0;
  // Most user pages one command's data may touch, 0 for no limit. Passthrough hands the data
  // to the kernel, which pins every page and fails a request with more than its nvme-pci
  // max_segments of them (EINVAL), whatever blockcore thinks of the buffer's segments.
  virtual uint32_t max_user_pages() const { return 0; }
  // How the controller is reached, as the kernel's /sys/class/nvme/nvmeX/transport says:
  // "pcie" (data in PRP lists: the 4 KiB virt boundary) or a fabric ("tcp", "rdma", "fc",
  // "loop": SGLs, no virt boundary). The emulated namespace is a PCIe controller.
  virtual std::string kernel_transport() const { return "pcie"; }
  bool fabric() const { return kernel_transport() != "pcie"; }
  // Runs an admin command synchronously (start-up only); `data` receives `len` bytes from
  // the controller. Returns the NVMe status field (0: success), or -errno if the transport
  // itself could not carry the command, as nvme_submit_sync_cmd() does.
  virtual int admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) = 0;
  // Creates I/O queue p.qid into *out. Ok, or io_error with one line naming the queue.
  virtual Status create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) = 0;
};

// Error lines are printed to stderr, at most `n` per process (default 32), then one line
// saying the rest are counted but not printed.
void nvme_set_error_log_limit(int n);
// One line for a command that ends with an error (nvme_iod(rq)->status), named by its queue.
void nvme_log_error(const std::string& queue, const NvmeIod* iod);

}  // namespace biofs
