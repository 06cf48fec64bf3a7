// Counterpart of drivers/nvme/host/core.c (namespace set-up from Identify, queue limits,
// nvme_setup_cmd and completion status) and of the blk-mq half of drivers/nvme/host/pci.c
// (nvme_queue_rq, nvme_queue_rqs, nvme_commit_rqs, nvme_poll, nvme_init_hctx): the block
// driver over one NVMe namespace, whichever transport carries its commands.
//
// Start-up: Identify Controller and Identify Namespace through the transport give the LBA
// format, capacity, MDTS, ONCS and the volatile write cache, and from them the queue limits.
// Submission: queue_rqs() builds the command of every request in the plug list and hands each
// hardware queue's run of requests to its transport queue in one batch (one doorbell).
// Completion: whoever submits also reaps what is ready right after ringing the doorbell (the
// io_uring_submit_and_get_events() idea: the completions of a busy queue are handled by the
// thread that is running anyway), and behind it a completion thread per hardware queue (the
// default, for callers such as the FUSE daemon that do not poll) or the submitter itself
// through poll(). Poll queues (nr_poll_queues) never have a completion thread: the threads that
// submit polled I/O to them reap them (blockcore/blk_poll.h). Completions are ended in batches (blk_mq_end_request_batch), errors one by
// one with their mapped status, always outside the driver's locks: a bio callback may submit.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <stop_token>
#include <thread>
#include <vector>

#include "blockcore/blk_cover.h"
#include "blockcore/blk_mq.h"
#include "lib/status.h"
#include "nvme_cmd.h"
#include "nvme_spec.h"
#include "nvme_transport.h"

namespace biofs {

// The kernel's default of nvme_core.max_retries (drivers/nvme/host/core.c, v6.18).
inline constexpr unsigned NVME_DEFAULT_MAX_RETRIES = 5;

struct NvmeDriverConfig {
  unsigned nr_queues = 1;          // hardware queues (one transport queue each)
  // Poll queues beside them (nvme's poll_queues parameter): no completion thread; the threads
  // that submit REQ_POLLED I/O reap them (blockcore/blk_poll.h).
  unsigned nr_poll_queues = 0;
  unsigned queue_depth = 128;      // tags per hardware queue
  bool completion_thread = true;   // false: the submitter reaps with poll()/poll_all()
  // The completion thread runs on the CPU that submits to its hardware queue (checked at most
  // every AFFINITY_RECHECK_NS), as the kernel completes a request on the submitting CPU
  // (managed IRQ affinity, rq_affinity): the wake-up that a completion causes stays on one CPU
  // instead of crossing to another. It moves only when one CPU did all the submitting since
  // the last check: with submitters on several CPUs there is no one CPU to follow, and chasing
  // the latest costs a sched_setaffinity each time. Submitters that spin without ever
  // yielding or blocking should poll instead.
  bool completion_affinity = true;
  // nvme_core's max_retries: how often a failed command without DNR is sent again
  // (nvme_decide_disposition). 0: never.
  unsigned max_retries = NVME_DEFAULT_MAX_RETRIES;
  // How often a completion thread standing down for a covering thread looks at its queue.
  unsigned cover_look_ms = COVER_LOOK_MS;
  Toggles toggles;
};

// The driver caps a command at 4 MiB whatever MDTS allows (the kernel's NVME_MAX_KB_SZ).
inline constexpr uint32_t NVME_MAX_TRANSFER = 4u << 20;
inline constexpr uint64_t AFFINITY_RECHECK_NS = 10'000'000;

class NvmeDriver : public BlkMqOps {
 public:
  // Identifies the namespace and creates the queues into *out (nvme_probe's set-up). Ok, or one
  // line: invalid_argument for a bad configuration (queues, qd, poll_queues), io_error naming
  // the device if the transport fails or the LBA format is unsupported (metadata, or a block
  // size outside 512..64K).
  static Status create(std::unique_ptr<NvmeTransport> transport, const NvmeDriverConfig& cfg,
                       std::unique_ptr<NvmeDriver>* out);
  // Waits for every command in flight, then stops the completion threads.
  ~NvmeDriver() override;
  NvmeDriver(const NvmeDriver&) = delete;
  NvmeDriver& operator=(const NvmeDriver&) = delete;

  BlockDevice* bdev() { return &bdev_; }
  RequestQueue* queue() { return queue_.get(); }
  NvmeTransport* transport() { return transport_.get(); }
  const NvmeTransport* transport() const { return transport_.get(); }
  const NvmeNsInfo& ns() const { return ns_; }
  const NvmeIdCtrl& id_ctrl() const { return *id_ctrl_; }
  const NvmeIdNs& id_ns() const { return *id_ns_; }
  bool write_cache() const { return (id_ctrl_->vwc & NVME_CTRL_VWC_PRESENT) != 0; }
  uint32_t lba_size() const { return 1u << ns_.lba_shift; }
  // One line: "emu:/tmp/x.img: 2097152 x 512-byte blocks (1.0 GiB), mdts 128 KiB, vwc off".
  std::string describe() const;

  // Reaps every hardware queue once and ends what it found; with `wait`, blocks on each queue
  // that has commands in flight until one completes. Returns the requests completed. For
  // submitters without a completion thread.
  int poll_all(bool wait = false);
  uint64_t inflight() const;
  // How often completion threads moved to follow their submitter (completion_affinity).
  uint64_t affinity_moves() const;
  // Commands sent again after a failure (nvme_retry_req).
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }
  // Submission doorbells rung (nvme_write_sq_db with write_sq true): one per hardware queue's
  // run of a plug flush, per queue_rq with `last`, per commit_rqs.
  uint64_t doorbells() const;
  // Commands sent through a buffer registered with their ring (passthrough's fixedbufs).
  uint64_t fixed_buffer_cmds() const;
  // Requests a completion thread reaped while a thread covered its queue (cover_look_ms).
  uint64_t cover_misses() const;
  // Completion threads asleep now because a thread covers their queue.
  unsigned standing_down() const;

  blk_status_t queue_rq(BlkMqHwCtx* hctx, Request* rq, bool last) override;
  void queue_rqs(RqList* rqs) override;
  void commit_rqs(BlkMqHwCtx* hctx) override;
  // Adds what the hardware queue has completed to iob (the caller ends the batch); 0 if
  // another thread is reaping it.
  int poll(BlkMqHwCtx* hctx, IoCompBatch* iob) override;
  void poll_wait(BlkMqHwCtx* hctx) override;
  int completion_fd(BlkMqHwCtx* hctx) override;
  void set_covered(BlkMqHwCtx* hctx, bool covered) override;
  int init_hctx(BlkMqHwCtx* hctx, unsigned hctx_idx) override;

 private:
  NvmeDriver(std::unique_ptr<NvmeTransport> transport, const NvmeDriverConfig& cfg);
  Status init();  // create()'s work; the destructor undoes what it set up

  struct alignas(64) NvmeHctx {  // struct nvme_queue
    std::unique_ptr<NvmeQueue> q;
    std::mutex sq_lock;  // submit/commit/wake; never held while a bio callback runs
    std::mutex cq_lock;  // reap; never held while a bio callback runs
    alignas(64) std::atomic<uint64_t> inflight{0};
    std::atomic<int> submit_cpu{-1};  // the CPU that submitted last (completion_affinity)
    std::atomic<uint32_t> submit_cpu_changes{0};  // how often submit_cpu changed
    std::atomic<uint64_t> affinity_moves{0};      // times the completion thread moved
    std::atomic<uint64_t> doorbells{0};           // written under sq_lock, read by anyone
    std::jthread completer;  // default queues only
    // The completion cover (blk_cover.h): `covered` is the futex the standing-down completion
    // thread sleeps on, `parked` says it does.
    alignas(64) std::atomic<uint32_t> covered{0};
    std::atomic<bool> parked{false};
    std::atomic<uint64_t> cover_misses{0};
    bool polled = false;
  };

  Status identify();
  QueueLimits limits() const;
  void submit_run(NvmeHctx* nq, RqList* run, RqList* requeue);
  int reap(NvmeHctx* nq, bool block);  // reaps and ends a batch; -1 if the lock was busy
  void reap_own(NvmeHctx* nq);         // a submitter's reap of what it may have completed itself
  void completion_thread(std::stop_token stop, NvmeHctx* nq);
  static void stand_down(NvmeHctx* nq, unsigned look_ms);
  static void set_covered(NvmeHctx* nq, bool covered);
  bool end_failed(NvmeHctx* nq, RqList* failed);  // ends or retries each; true if any was sent again
  bool nvme_retry_req(NvmeHctx* nq, Request* rq);
  static void follow_submitter(NvmeHctx* nq, int* cpu, uint64_t* checked_ns, uint32_t* seen_changes);

  std::unique_ptr<NvmeTransport> transport_;
  NvmeDriverConfig cfg_;
  std::unique_ptr<NvmeIdCtrl> id_ctrl_;
  std::unique_ptr<NvmeIdNs> id_ns_;
  NvmeNsInfo ns_;
  uint32_t max_transfer_ = 0;
  std::atomic<uint64_t> retries_{0};
  std::vector<std::unique_ptr<NvmeHctx>> hctxs_;
  std::unique_ptr<RequestQueue> queue_;
  BlockDevice bdev_;
};

}  // namespace biofs
