// Counterpart of drivers/nvme/host/core.c (nvme_identify_ctrl/_ns, nvme_update_ns_info,
// nvme_set_ctrl_limits, nvme_setup_cmd) and the blk-mq operations of drivers/nvme/host/pci.c.
#include "nvme_driver.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "blockcore/stage_clock.h"
#include "blockcore/usdt.h"
#include "lib/background_thread.h"

namespace biofs {

namespace {
// The CPU a submitting thread runs on, read once per thread: threads that submit are pinned
// (the daemon's and the benchmarks' are), as blockcore's queue map assumes.
thread_local int tls_submit_cpu = -1;
inline int submit_cpu() {
  if (tls_submit_cpu < 0) [[unlikely]] {
    const int cpu = sched_getcpu();
    tls_submit_cpu = cpu < 0 ? 0 : cpu;
  }
  return tls_submit_cpu;
}
uint64_t mono_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}
}  // namespace

NvmeDriver::NvmeDriver(std::unique_ptr<NvmeTransport> transport, const NvmeDriverConfig& cfg)
    : transport_(std::move(transport)), cfg_(cfg) {}

Status NvmeDriver::create(std::unique_ptr<NvmeTransport> transport, const NvmeDriverConfig& cfg,
                          std::unique_ptr<NvmeDriver>* out) {
  out->reset();
  std::unique_ptr<NvmeDriver> d(new NvmeDriver(std::move(transport), cfg));
  if (Status s = d->init(); !s.ok()) return s;
  *out = std::move(d);
  return Status();
}

Status NvmeDriver::init() {
  if (!transport_) return Status::invalid_argument("nvme: no transport");
  if (cfg_.nr_queues == 0 || cfg_.nr_queues > 256)
    return Status::invalid_argument("queues=" + std::to_string(cfg_.nr_queues) + ": expected 1..256");
  if (cfg_.queue_depth == 0 || cfg_.queue_depth > 65535)  // the command id is 16 bits
    return Status::invalid_argument("qd=" + std::to_string(cfg_.queue_depth) + ": expected 1..65535");
  if (cfg_.nr_poll_queues > 256)
    return Status::invalid_argument("poll_queues=" + std::to_string(cfg_.nr_poll_queues) + ": expected 0..256");
  if (Status s = identify(); !s.ok()) return s;
  for (unsigned i = 0; i < cfg_.nr_queues + cfg_.nr_poll_queues; i++) {
    auto nq = std::make_unique<NvmeHctx>();
    nq->polled = i >= cfg_.nr_queues;
    NvmeQueueParams p;
    p.qid = i + 1;
    p.depth = cfg_.queue_depth;
    p.nsid = ns_.nsid;
    p.lba_shift = ns_.lba_shift;
    p.max_transfer = max_transfer_;
    p.polled = nq->polled;
    if (Status s = transport_->create_queue(p, &nq->q); !s.ok()) return s;
    hctxs_.push_back(std::move(nq));
  }
  TagSetConfig set;
  set.nr_hw_queues = cfg_.nr_queues;
  set.nr_poll_queues = cfg_.nr_poll_queues;
  set.queue_depth = cfg_.queue_depth;
  set.cmd_size = sizeof(NvmeIod);
  queue_ = std::make_unique<RequestQueue>(limits(), this, cfg_.toggles);
  std::string why;
  if (int ret = queue_->init(set, &why); ret) return Status::from_errno(ret, why);
  bdev_.queue = queue_.get();
  bdev_.capacity = nvme_lba_to_sect(ns_, ns_.nsze);
  bdev_.name = transport_->name();
  if (cfg_.completion_thread)
    for (auto& nq : hctxs_)
      if (!nq->polled)
        nq->completer = start_background_thread(  // the thread role tools/biofs-compare reports
            "biofs-cq", [this, p = nq.get()](std::stop_token stop) { completion_thread(stop, p); });
  return Status();
}

NvmeDriver::~NvmeDriver() {
  for (auto& nq : hctxs_) {
    if (!nq->completer.joinable()) continue;  // a poll queue, no completion threads, or init() failed first
    nq->completer.request_stop();  // it stops once its queue has nothing in flight
    set_covered(nq.get(), false);
    std::lock_guard guard(nq->sq_lock);
    nq->q->wake();
  }
  for (auto& nq : hctxs_)
    if (nq->completer.joinable()) nq->completer.join();
  while (inflight()) poll_all(true);  // without completion threads, and the poll queues
  queue_.reset();
}

// nvme_identify_ctrl() + nvme_identify_ns() + the LBA format checks of nvme_update_ns_info().
// A negative answer from the transport is its own failure (-errno), a positive one the NVMe status.
Status NvmeDriver::identify() {
  const std::string where = transport_->name();
  auto admin_failed = [&](uint8_t opcode, int neg_errno) {
    char op[8];
    std::snprintf(op, sizeof(op), "0x%02x", opcode);
    return Status::io_error(where + ": admin command " + op + " failed: " + std::strerror(-neg_errno));
  };
  id_ctrl_ = std::make_unique<NvmeIdCtrl>();
  id_ns_ = std::make_unique<NvmeIdNs>();
  const NvmeCommand id_ctrl_cmd = nvme_identify_cmd(NVME_ID_CNS_CTRL, 0);
  if (int st = transport_->admin_cmd(id_ctrl_cmd, id_ctrl_.get(), sizeof(NvmeIdCtrl)); st < 0)
    return admin_failed(id_ctrl_cmd.opcode, st);
  else if (st)
    return Status::io_error(where + ": Identify Controller failed: " + nvme_status_describe(uint16_t(st)));
  ns_.nsid = transport_->nsid();
  const NvmeCommand id_ns_cmd = nvme_identify_cmd(NVME_ID_CNS_NS, ns_.nsid);
  if (int st = transport_->admin_cmd(id_ns_cmd, id_ns_.get(), sizeof(NvmeIdNs)); st < 0)
    return admin_failed(id_ns_cmd.opcode, st);
  else if (st)
    return Status::io_error(where + ": Identify Namespace " + std::to_string(ns_.nsid) +
                            " failed: " + nvme_status_describe(uint16_t(st)));
  const NvmeIdNs& id = *id_ns_;
  const unsigned idx = nvme_lbaf_index(id.flbas);
  if (idx > id.nlbaf || idx >= 64)
    return Status::io_error(where + ": Identify Namespace: FLBAS selects LBA format " + std::to_string(idx) +
                            " of " + std::to_string(id.nlbaf + 1));
  const NvmeLbaf& lbaf = id.lbaf[idx];
  if (lbaf.ms)
    return Status::io_error(where + ": unsupported LBA format " + std::to_string(idx) + ": " +
                            std::to_string(lbaf.ms) +
                            " bytes of metadata per block (biofs supports formats without metadata)");
  if (lbaf.ds < 9 || lbaf.ds > 16)
    return Status::io_error(where + ": unsupported LBA format " + std::to_string(idx) + ": 2^" +
                            std::to_string(lbaf.ds) + "-byte blocks (biofs supports 512 to 65536)");
  if (!id.nsze) return Status::io_error(where + ": namespace " + std::to_string(ns_.nsid) + " has no blocks");
  ns_.lba_shift = lbaf.ds;
  ns_.nsze = id.nsze;
  // ctrl->max_hw_sectors: MDTS in controller pages, capped by the driver and by the 16-bit NLB.
  uint64_t max = NVME_MAX_TRANSFER;
  if (id_ctrl_->mdts) max = std::min<uint64_t>(max, uint64_t(NVME_CTRL_PAGE_SIZE) << std::min<unsigned>(id_ctrl_->mdts, 31));
  max = std::min<uint64_t>(max, uint64_t(NVME_MAX_NLB) << ns_.lba_shift);
  // A buffer of `max` bytes at any offset touches at most max/4096 + 1 pages: keep that within
  // what the transport's kernel maps (127 for passthrough: 504 KiB, not the 512 KiB of MDTS).
  if (const uint32_t pages = transport_->max_user_pages(); pages > 1) {
    const uint64_t fit = uint64_t(pages - 1) * NVME_CTRL_PAGE_SIZE;
    max = std::min<uint64_t>(max, fit >> ns_.lba_shift << ns_.lba_shift);
  }
  if (max < (1u << ns_.lba_shift))
    return Status::io_error(where + ": MDTS allows " + std::to_string(max) + " bytes, less than one block");
  max_transfer_ = uint32_t(max);
  return Status();
}

// nvme_set_ctrl_limits() + nvme_update_disk_info() + nvme_config_discard().
QueueLimits NvmeDriver::limits() const {
  QueueLimits lim;
  lim.logical_block_size = 1u << ns_.lba_shift;
  lim.max_hw_sectors = max_transfer_ >> SECTOR_SHIFT;
  // nvme_max_drv_segments(): one PRP entry per controller page, plus one for an offset start;
  // never more than the kernel's nvme-pci takes (NVME_MAX_SEGS there is 127): a passthrough
  // command's pages become a kernel request, which the QEMU guest showed failing with EINVAL
  // at 129 segments.
  // A fabric controller takes SGLs: no virt boundary, and the kernel's queue up to USHRT_MAX segments, as the
  // queue of an nvme-tcp namespace shows on Linux 7.2 (6.12 still set the PRP boundary there;
  // tests/qemu/guest-checks.sh compares them).
  // Either way a request is one command whose data is at most NVME_MAX_SEGS iovecs (the iod's
  // vecs[], one PRP/SGL list over every bio a plug merge chained on the request): a fabric
  // queue keeps that bound, above nvme-pci's 127, so that no merged request outgrows its iod.
  const bool fabric = transport_->fabric();
  lim.max_segments = std::min<uint32_t>(lim.max_hw_sectors / (NVME_CTRL_PAGE_SIZE >> SECTOR_SHIFT) + 1,
                                        fabric ? NVME_MAX_SEGS : NVME_KERNEL_MAX_SEGS);
  lim.virt_boundary_mask = fabric ? 0 : NVME_CTRL_PAGE_SIZE - 1;
  lim.max_segment_size = UINT32_MAX;
  lim.dma_alignment = 3;
  lim.write_cache = write_cache();  // nvme_update_disk_info(): the VWC bit
  if (id_ctrl_->oncs & NVME_CTRL_ONCS_DSM) lim.max_discard_sectors = UINT32_MAX >> SECTOR_SHIFT;
  if (id_ctrl_->oncs & NVME_CTRL_ONCS_WRITE_ZEROES) lim.max_write_zeroes_sectors = lim.max_hw_sectors;
  return lim;
}

std::string NvmeDriver::describe() const {
  char buf[256];
  const uint64_t bytes = ns_.nsze << ns_.lba_shift;
  std::snprintf(buf, sizeof(buf), "%s%s: nsid %u, %llu x %u-byte blocks (%.1f GiB), max transfer %u KiB, vwc %s, %u queue%s x %u",
                transport_->name().c_str(), transport_->fabric() ? (" over " + transport_->kernel_transport()).c_str() : "", ns_.nsid, (unsigned long long)ns_.nsze, 1u << ns_.lba_shift,
                double(bytes) / double(1ull << 30), max_transfer_ >> 10, write_cache() ? "on" : "off",
                cfg_.nr_queues, cfg_.nr_queues == 1 ? "" : "s", cfg_.queue_depth);
  return buf;
}

int NvmeDriver::init_hctx(BlkMqHwCtx* hctx, unsigned hctx_idx) {
  if (hctx_idx >= hctxs_.size()) return -1;
  hctx->driver_data = hctxs_[hctx_idx].get();
  return 0;
}

// Counts a doorbell; the caller holds sq_lock, so a plain load and store suffice.
static inline void ring_doorbell_count(std::atomic<uint64_t>* n) {
  n->store(n->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// One hardware queue's run of prepared requests: one lock, one doorbell. What the ring cannot
// take goes to `requeue` for the core to retry one by one.
void NvmeDriver::submit_run(NvmeHctx* nq, RqList* run, RqList* requeue) {
  unsigned n = 0;
  for (Request* rq = run->head; rq; rq = rq->rq_next) n++;
  nq->inflight.fetch_add(n, std::memory_order_relaxed);
  if (cfg_.completion_thread && cfg_.completion_affinity && !nq->polled) {
    const int cpu = submit_cpu();
    if (nq->submit_cpu.load(std::memory_order_relaxed) != cpu) {
      nq->submit_cpu.store(cpu, std::memory_order_relaxed);
      nq->submit_cpu_changes.fetch_add(1, std::memory_order_relaxed);
    }
  }
  stage_rqs_submitted(run->head);
  {
    std::lock_guard guard(nq->sq_lock);
    nq->q->submit(run, true);
    ring_doorbell_count(&nq->doorbells);
  }
  if (run->empty()) [[likely]] {
    reap_own(nq);
    return;
  }
  unsigned left = 0;
  while (Request* rq = run->pop()) {
    requeue->add_tail(rq);
    left++;
  }
  nq->inflight.fetch_sub(left, std::memory_order_relaxed);
}

// nvme_queue_rqs() as in mainline v6.18 (drivers/nvme/host/pci.c): commands for the whole plug
// list, submitted per hardware queue. The queue is switched (and the run so far submitted)
// by each request's hctx before its command is prepared; a request whose command cannot be
// set up (nvme_prep_rq_batch() false) goes on the requeue list, which is left in *rqs for the
// core. The core then issues it alone through queue_rq(), whose nvme_setup_cmd() fails again
// and whose status ends it (blk_mq_issue_direct). It is not ended here.
void NvmeDriver::queue_rqs(RqList* rqs) {
  RqList run, requeue;
  BlkMqHwCtx* cur = nullptr;
  while (Request* rq = rqs->pop()) {
    if (cur && rq->mq_hctx != cur && !run.empty()) {
      submit_run(static_cast<NvmeHctx*>(cur->driver_data), &run, &requeue);
      run = RqList{};
    }
    cur = rq->mq_hctx;
    if (nvme_setup_cmd(ns_, rq, nvme_iod(rq)) == BLK_STS_OK) [[likely]]
      run.add_tail(rq);
    else
      requeue.add_tail(rq);  // nvme_prep_rq_batch() failed
  }
  if (!run.empty()) submit_run(static_cast<NvmeHctx*>(cur->driver_data), &run, &requeue);
  *rqs = requeue;
}

// nvme_queue_rq()
blk_status_t NvmeDriver::queue_rq(BlkMqHwCtx* hctx, Request* rq, bool last) {
  if (const blk_status_t st = nvme_setup_cmd(ns_, rq, nvme_iod(rq))) return st;
  auto* nq = static_cast<NvmeHctx*>(hctx->driver_data);
  RqList one;
  one.add_tail(rq);
  nq->inflight.fetch_add(1, std::memory_order_relaxed);
  stage_rqs_submitted(rq);
  {
    std::lock_guard guard(nq->sq_lock);
    nq->q->submit(&one, last);
    if (last) ring_doorbell_count(&nq->doorbells);
  }
  if (one.empty()) [[likely]] {
    if (last || nq->q->completed_in_submit()) reap_own(nq);
    return BLK_STS_OK;
  }
  nq->inflight.fetch_sub(1, std::memory_order_relaxed);
  return BLK_STS_RESOURCE;
}

void NvmeDriver::commit_rqs(BlkMqHwCtx* hctx) {
  auto* nq = static_cast<NvmeHctx*>(hctx->driver_data);
  {
    std::lock_guard guard(nq->sq_lock);
    nq->q->commit();
    ring_doorbell_count(&nq->doorbells);
  }
  reap_own(nq);
}

// The nvme:nvme_complete_rq tracepoint for each successful completion in `iob` after `after`
// (USDT `nvme:nvme_complete_rq`: qid, cid, status; the kernel's order without its controller
// id, result, retries and flags); failures fire it in end_failed(), retried or not, as the kernel's.
[[gnu::cold, gnu::noinline]] static void trace_nvme_complete_list(const Request* first) {
  for (const Request* rq = first; rq; rq = rq->rq_next) BIOFS_PROBE(nvme, nvme_complete_rq, rq->mq_hctx->queue_num, rq->tag, 0);
}
static inline void trace_nvme_complete_batch(const IoCompBatch& iob, const Request* after = nullptr) {
  if (tracing_on()) [[unlikely]]
    trace_nvme_complete_list(after ? after->rq_next : iob.req_list.head);
}

// nvme_poll(): successes go to iob for the caller to end; failures are ended here.
int NvmeDriver::poll(BlkMqHwCtx* hctx, IoCompBatch* iob) {
  auto* nq = static_cast<NvmeHctx*>(hctx->driver_data);
  RqList failed;
  int n;
  {
    std::unique_lock guard(nq->cq_lock, std::try_to_lock);
    if (!guard.owns_lock()) return 0;
    const Request* before = iob->req_list.tail;
    n = nq->q->reap(iob, &failed);
    trace_nvme_complete_batch(*iob, before);
  }
  end_failed(nq, &failed);
  if (n) nq->inflight.fetch_sub(uint64_t(n), std::memory_order_acq_rel);
  return n;
}

// The poll queue's stand-in for an interrupt: sleep in the transport until it has a completion
// (bounded by REAP_WAIT_MS), so that pollers that outnumber the CPUs do not spin.
void NvmeDriver::poll_wait(BlkMqHwCtx* hctx) {
  auto* nq = static_cast<NvmeHctx*>(hctx->driver_data);
  if (nq->inflight.load(std::memory_order_acquire)) nq->q->wait();
}

// After a submission: what the device finished meanwhile, while this thread is here anyway.
// Commands it finished inside submit() (completed_in_submit()) post nothing that would wake
// another reaper, so if the reap's lock is taken this thread waits for it and ends them itself.
void NvmeDriver::reap_own(NvmeHctx* nq) {
  if (reap(nq, false) < 0 && nq->q->completed_in_submit()) reap(nq, true);
}

// A command sent again here by a device that runs commands inline has completed already and
// posts nothing for another reaper to see: the loop reaps it.
int NvmeDriver::reap(NvmeHctx* nq, bool block) {
  int total = 0;
  for (;;) {
    IoCompBatch iob;
    RqList failed;
    int n;
    {
      std::unique_lock guard(nq->cq_lock, std::defer_lock);
      if (block)
        guard.lock();
      else if (!guard.try_lock())
        return total ? total : -1;
      n = nq->q->reap(&iob, &failed);
    }
    trace_nvme_complete_batch(iob);
    blk_mq_end_request_batch(&iob);
    const bool resent = end_failed(nq, &failed);
    if (n) nq->inflight.fetch_sub(uint64_t(n), std::memory_order_acq_rel);
    total += n;
    if (!resent || !nq->q->completed_in_submit()) return total;
    block = true;
  }
}

// v6.18 nvme_decide_disposition() (drivers/nvme/host/core.c), without multipath (FAILOVER) and
// in-band authentication (AUTHENTICATE), which biofs does not have: a failed command is
// completed with its error if the request may not be retried (blk_noretry_request(): here
// REQ_FAILFAST), if its status has DNR (Do Not Retry), or once it has been retried
// max_retries times; otherwise it is retried.
static bool nvme_should_retry(Request* rq, unsigned max_retries) {
  const NvmeIod* iod = nvme_iod(rq);
  if (rq->cmd_flags & REQ_FAILFAST) return false;
  if (iod->status & NVME_STATUS_DNR) return false;
  return iod->retries < max_retries;
}

bool NvmeDriver::end_failed(NvmeHctx* nq, RqList* failed) {
  bool resent = false;
  while (Request* rq = failed->pop()) {
    if (tracing_on()) [[unlikely]]
      BIOFS_PROBE(nvme, nvme_complete_rq, rq->mq_hctx->queue_num, rq->tag, nvme_iod(rq)->status);
    if (nvme_should_retry(rq, cfg_.max_retries) && nvme_retry_req(nq, rq)) {
      resent = true;
      continue;
    }
    nvme_log_error(nq->q->name(), nvme_iod(rq));
    blk_mq_end_request(rq, rq->status);
  }
  return resent;
}

// v6.18 nvme_retry_req(): the command goes to its queue again with its retry count one higher.
// The kernel requeues the request (blk_mq_requeue_request) and kblockd sends it after the
// Command Retry Delay that the status's CRD field selects (CRDT1-3 of Identify Controller);
// here the reaper sends it at once: the CRD field is not read (the emulated controller and
// QEMU's report CRDT 0). False if it could not be sent; the caller then ends it.
bool NvmeDriver::nvme_retry_req(NvmeHctx* nq, Request* rq) {
  NvmeIod* iod = nvme_iod(rq);
  const uint8_t retries = uint8_t(iod->retries + 1);
  if (nvme_setup_cmd(ns_, rq, iod) != BLK_STS_OK) return false;  // it was set up once: not expected
  iod->retries = retries;
  RqList one;
  one.add_tail(rq);
  nq->inflight.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard guard(nq->sq_lock);
    nq->q->submit(&one, true);
  }
  if (!one.empty()) {  // cannot happen (one slot per tag); end it with its error rather than lose it
    nq->inflight.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  retries_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int NvmeDriver::poll_all(bool wait) {
  int total = 0;
  for (auto& nq : hctxs_) total += std::max(reap(nq.get(), false), 0);
  while (wait && !total) {
    bool busy = false;
    for (auto& nq : hctxs_) {
      if (!nq->inflight.load(std::memory_order_acquire)) continue;
      busy = true;
      nq->q->wait();
      total += std::max(reap(nq.get(), true), 0);
    }
    if (!busy) break;
  }
  return total;
}

uint64_t NvmeDriver::doorbells() const {
  uint64_t n = 0;
  for (const auto& nq : hctxs_) n += nq->doorbells.load(std::memory_order_relaxed);
  return n;
}

uint64_t NvmeDriver::fixed_buffer_cmds() const {
  uint64_t n = 0;
  for (const auto& nq : hctxs_) n += nq->q->fixed_buffer_cmds();
  return n;
}

uint64_t NvmeDriver::inflight() const {
  uint64_t n = 0;
  for (const auto& nq : hctxs_) n += nq->inflight.load(std::memory_order_acquire);
  return n;
}

// Moves the calling completion thread to the hardware queue's submitting CPU, when one CPU did
// all the submitting since the last check.
void NvmeDriver::follow_submitter(NvmeHctx* nq, int* cpu, uint64_t* checked_ns, uint32_t* seen_changes) {
  const uint64_t now = mono_ns();
  if (now - *checked_ns < AFFINITY_RECHECK_NS) return;
  *checked_ns = now;
  const uint32_t changes = nq->submit_cpu_changes.load(std::memory_order_relaxed);
  const bool one_cpu = changes == *seen_changes;
  *seen_changes = changes;
  const int want = nq->submit_cpu.load(std::memory_order_relaxed);
  if (!one_cpu || want < 0 || want == *cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(want, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0) {
    *cpu = want;
    nq->affinity_moves.fetch_add(1, std::memory_order_relaxed);
  }
}

uint64_t NvmeDriver::affinity_moves() const {
  uint64_t n = 0;
  for (const auto& nq : hctxs_) n += nq->affinity_moves.load(std::memory_order_relaxed);
  return n;
}

int NvmeDriver::completion_fd(BlkMqHwCtx* hctx) {
  auto* nq = static_cast<NvmeHctx*>(hctx->driver_data);
  return nq->polled ? -1 : nq->q->completion_fd();
}

// blk_cover.h: a covering thread is running or waiting in a ring that polls completion_fd().
// Uncovered, a standing-down completion thread is woken (Dekker with stand_down(): each side
// stores its flag, then reads the other's).
void NvmeDriver::set_covered(BlkMqHwCtx* hctx, bool covered) {
  set_covered(static_cast<NvmeHctx*>(hctx->driver_data), covered);
}

void NvmeDriver::set_covered(NvmeHctx* nq, bool covered) {
  nq->covered.store(covered ? 1 : 0, std::memory_order_seq_cst);
  if (!covered && nq->parked.load(std::memory_order_seq_cst))
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&nq->covered), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// The completion thread while its queue is covered: asleep until uncovered, or look_ms.
void NvmeDriver::stand_down(NvmeHctx* nq, unsigned look_ms) {
  nq->parked.store(true, std::memory_order_seq_cst);
  if (nq->covered.load(std::memory_order_seq_cst)) {
    const timespec ts{time_t(look_ms / 1000), long(look_ms % 1000) * 1'000'000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&nq->covered), FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
  }
  nq->parked.store(false, std::memory_order_relaxed);
}

uint64_t NvmeDriver::cover_misses() const {
  uint64_t n = 0;
  for (const auto& nq : hctxs_) n += nq->cover_misses.load(std::memory_order_relaxed);
  return n;
}

unsigned NvmeDriver::standing_down() const {
  unsigned n = 0;
  for (const auto& nq : hctxs_) n += nq->parked.load(std::memory_order_acquire) ? 1 : 0;
  return n;
}

void NvmeDriver::completion_thread(std::stop_token stop, NvmeHctx* nq) {
  int cpu = -1;
  uint64_t checked_ns = 0;
  uint32_t seen_changes = 0;
  for (;;) {
    const bool stood_down = nq->covered.load(std::memory_order_acquire);
    if (stood_down) {
      stand_down(nq, cfg_.cover_look_ms);
    } else {
      nq->q->wait();
      if (cfg_.completion_affinity) follow_submitter(nq, &cpu, &checked_ns, &seen_changes);
    }
    const bool covered = nq->covered.load(std::memory_order_acquire);  // before the reap ends anything
    const int n = reap(nq, !stood_down);
    if (n > 0 && covered) nq->cover_misses.fetch_add(uint64_t(n), std::memory_order_relaxed);
    if (stop.stop_requested() && !nq->inflight.load(std::memory_order_acquire)) return;
  }
}

}  // namespace biofs
