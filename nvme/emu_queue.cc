// Counterpart of the NVMe target's command execution for the file back-end
// (drivers/nvme/target/io-cmd-file.c: nvmet_file_parse_io_cmd, nvmet_file_execute_rw,
// _flush, _dsm, _write_zeroes) and of its I/O command checks (nvmet_check_transfer_len,
// the LBA range check): one emulated I/O queue pair, executed through one io_uring.
//
// Every command completes through the reaper, as from hardware: commands that fail the
// controller's checks post their status through a NOP. The commands the queue runs inline
// (emu_ns.h, `inline=`: plain system calls on the submitting thread, run_sync) are done when
// submit() returns: they wait on a list of their own (done_), which reap() takes first and
// which the submitter reaps itself (completed_in_submit()); no CQE, so no waiter is woken.
//
// The host's transient answers are not media errors. io_uring hands a read or write it cannot
// issue without blocking (the RWF_DSYNC O_DIRECT writes below often are) to an io-wq worker
// thread; when no worker can be created (a pids cgroup or RLIMIT_NPROC at its limit, as on a
// loaded CI machine) the request completes with -ECANCELED, and so does every later one that
// needs a worker while the limit holds. A worker can also pass on -EAGAIN, a blocking read
// issued by a worker may come back short, and -EINTR and -ENOMEM are "not now" too. A command
// that meets any of these is run again, whole and synchronously, by the reaper (execute_sync):
// reads and writes at an offset, fallocate and fdatasync are idempotent, and plain system
// calls need no worker. QEMU's io_uring back-end does the same (block/io_uring.c resubmits on
// -EAGAIN/-EINTR and continues short reads). A transfer that stays short (the file shrank
// under us) is still a Data Transfer Error.
#include <linux/fs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "bounce.h"
#include "emu_ns.h"
#include "uring_util.h"

namespace biofs {
namespace {

enum EmuXfer : uint8_t {
  EMU_XFER_NONE = 0,
  EMU_XFER_DIRECT,    // O_DIRECT on the caller's memory
  EMU_XFER_BOUNCE,    // O_DIRECT through the command's aligned bounce slot
  EMU_XFER_BUFFERED,  // the page cache, for offsets or lengths O_DIRECT cannot take
  EMU_XFER_POSTED,    // no file operation: the status was posted through a NOP
};

// Host answers that say "not now" rather than "this failed": the command is run again.
bool host_transient(int neg_errno) {
  return neg_errno == -ECANCELED || neg_errno == -EAGAIN || neg_errno == -EINTR || neg_errno == -ENOMEM;
}
enum : int { EMU_FD_DIRECT = 0, EMU_FD_BUFFERED = 1 };  // registered file indexes

class EmuQueue final : public NvmeQueue {
 public:
  EmuQueue(EmuNamespace* ns, const NvmeQueueParams& p);
  ~EmuQueue() override {
    if (ring_up_) io_uring_queue_exit(&ring_);
  }
  Status init(const NvmeQueueParams& p);  // the ring and the bounce slots; the destructor undoes them

  void submit(RqList* rqs, bool commit) override;
  void commit() override { uring_submit(&ring_); }
  int reap(IoCompBatch* iob, RqList* failed) override;
  bool completed_in_submit() const override { return done_.load(std::memory_order_relaxed) != nullptr; }
  void wait() override {
    if (!completed_in_submit()) uring_wait(&ring_);
  }
  void wake() override;
  int completion_fd() const override { return ring_.ring_fd; }

 private:
  io_uring_sqe* get_sqe();
  void queue_cmd(NvmeIod* iod);
  void queue_rw(NvmeIod* iod);
  void queue_write_zeroes(NvmeIod* iod);
  void queue_dsm(NvmeIod* iod);
  void queue_flush(NvmeIod* iod);
  void post(NvmeIod* iod, uint16_t status);  // completes the command through a NOP
  bool lba_range_ok(uint64_t slba, uint64_t nlb) const {
    return nlb <= nlba_ && slba <= nlba_ - nlb;
  }
  uint8_t choose_xfer(const NvmeIod* iod, uint64_t off) const;
  void finish(NvmeIod* iod, IoCompBatch* iob, RqList* failed);
  int inject_host_fault(const NvmeIod* iod, int res, unsigned every);
  bool run_inline() const { return inline_ && !ns_->host_fault_every(); }
  bool run_flush_inline() const { return inline_flush_ && !ns_->host_fault_every(); }
  uint16_t execute_sync(NvmeIod* iod);
  uint16_t run_sync(NvmeIod* iod);
  void execute_inline(NvmeIod* iod, uint8_t xfer);
  void complete_in_submit(NvmeIod* iod, uint16_t status);
  void cached_read(NvmeIod* iod, uint64_t off, const EmuWriteCache::Overlay& overlay);
  uint16_t sync_rw(NvmeIod* iod);

  EmuNamespace* ns_;
  io_uring ring_;
  bool ring_up_ = false;  // init() set up ring_
  BounceArena bounce_;
  const uint32_t nsid_;
  const unsigned lba_shift_;
  const uint64_t nlba_;
  const uint32_t max_transfer_;  // 0: no MDTS
  const unsigned depth_;
  const bool vwc_;
  const bool inline_;  // EmuNamespace::inline_io()
  const bool inline_flush_;  // EmuNamespace::inline_flush()
  const uint32_t mem_mask_, off_mask_;  // O_DIRECT alignment masks (direct fd only)
  EmuPowerCut* const powercut_;  // power-cut emulation: every command runs in it, synchronously
  EmuWriteCache* const cache_;   // the volatile write cache (emu_write_cache.h), or nullptr
  uint64_t fault_seen_ = 0;      // tests: file operations reaped while host answers are injected
  // Inline commands done and not yet reaped: a stack through Request::rq_next (free while the
  // request is with the device), pushed by submitters, taken whole by the reaper.
  std::atomic<Request*> done_{nullptr};
  bool ran_inline_ = false;  // queue_cmd() ran the command inline (set and taken by submit(), one submitter at a time)
};

EmuQueue::EmuQueue(EmuNamespace* ns, const NvmeQueueParams& p)
    : NvmeQueue(ns->name() + " q" + std::to_string(p.qid)),
      ns_(ns),
      nsid_(ns->nsid()),
      lba_shift_(ns->lba_shift()),
      nlba_(ns->nlba()),
      max_transfer_(ns->max_transfer()),
      depth_(p.depth),
      vwc_(ns->config().vwc),
      inline_(ns->inline_io()),
      inline_flush_(ns->inline_flush()),
      mem_mask_(ns->direct() ? ns->dio_mem_align() - 1 : 0),
      off_mask_(ns->direct() ? ns->dio_offset_align() - 1 : 0),
      powercut_(ns->powercut()),
      cache_(ns->write_cache()) {}

Status EmuQueue::init(const NvmeQueueParams& p) {
  io_uring_params params{};
  params.flags = IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL;
  const std::string err = uring_init(&ring_, std::max(2 * p.depth, 64u), &params, IORING_SETUP_SUBMIT_ALL, name_);
  if (!err.empty()) return Status::io_error(err);
  ring_up_ = true;
  const int fds[2] = {ns_->direct() ? ns_->direct_fd() : ns_->buffered_fd(), ns_->buffered_fd()};
  if (int ret = io_uring_register_files(&ring_, fds, 2); ret < 0)
    return Status::io_error(name_ + ": registering the backing file with io_uring failed: " + std::strerror(-ret));
  if (ns_->direct())
    if (Status s = bounce_.init(p.depth, p.max_transfer ? p.max_transfer : 4u << 20); !s.ok())
      return Status::io_error(name_ + ": " + s.message());
  return Status();
}

io_uring_sqe* EmuQueue::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (!sqe) [[unlikely]] {  // ring full: hand the kernel what is queued to make room
    uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void EmuQueue::post(NvmeIod* iod, uint16_t status) {
  iod->status = status;
  iod->pending = 1;
  iod->xfer = EMU_XFER_POSTED;
  NVME_TSAN_RELEASE(iod);
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data(sqe, iod);
}

void EmuQueue::execute_inline(NvmeIod* iod, uint8_t xfer) {
  ns_->count_inline_command();
  iod->xfer = xfer;
  complete_in_submit(iod, run_sync(iod));
}

// The command is done: submit() puts it on done_ for the reaper, with no file operation in flight.
void EmuQueue::complete_in_submit(NvmeIod* iod, uint16_t status) {
  iod->status = status;
  ran_inline_ = true;
}

// A read that overlaps writes still in the volatile cache: the file's data, then the cached
// writes over it, on the submitting thread (the cache's rule: a read sees every write that
// completed before it).
void EmuQueue::cached_read(NvmeIod* iod, uint64_t off, const EmuWriteCache::Overlay& overlay) {
  iod->xfer = EMU_XFER_BUFFERED;
  const uint16_t status = EmuWriteCache::covers(overlay, off, iod->data_len) ? uint16_t(NVME_SC_SUCCESS) : sync_rw(iod);
  if (status == NVME_SC_SUCCESS) EmuWriteCache::apply(overlay, off, iod->data_len, iod->vecs, iod->nr_vecs);
  complete_in_submit(iod, status);
}

void EmuQueue::wake() {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data(sqe, nullptr);
  uring_submit(&ring_);
}

void EmuQueue::submit(RqList* rqs, bool commit) {
  while (Request* rq = rqs->pop()) {
    NvmeIod* iod = nvme_iod(rq);
    queue_cmd(iod);
    if (ran_inline_) {  // done: once on done_, another thread may reap it, so nothing after the push
      ran_inline_ = false;
      rq->rq_next = done_.load(std::memory_order_relaxed);
      while (!done_.compare_exchange_weak(rq->rq_next, rq, std::memory_order_release, std::memory_order_relaxed)) {
      }
      continue;
    }
    // After the last access: the command goes to the kernel with a later submit. (The
    // releases inside cover commands whose first SQEs may be submitted while they are built.)
    NVME_TSAN_RELEASE(iod);
  }
  if (commit) uring_submit(&ring_);
}

// nvmet_file_parse_io_cmd()
void EmuQueue::queue_cmd(NvmeIod* iod) {
  iod->status = NVME_SC_SUCCESS;
  iod->redo = 0;
  if (iod->cmd.nsid != nsid_) [[unlikely]]
    return post(iod, NVME_SC_INVALID_NS | NVME_STATUS_DNR);
  if (powercut_) [[unlikely]]
    return post(iod, powercut_->execute(iod));
  switch (iod->cmd.opcode) {
    case nvme_cmd_read:
    case nvme_cmd_write:
      return queue_rw(iod);
    case nvme_cmd_flush:
      return queue_flush(iod);
    case nvme_cmd_write_zeroes:
      return queue_write_zeroes(iod);
    case nvme_cmd_dsm:
      return queue_dsm(iod);
    default:
      return post(iod, NVME_SC_INVALID_OPCODE | NVME_STATUS_DNR);
  }
}

// Direct on the caller's memory if every segment is aligned as O_DIRECT needs; through the
// bounce slot if only the memory is not; buffered if the offset or length is not.
uint8_t EmuQueue::choose_xfer(const NvmeIod* iod, uint64_t off) const {
  if (!ns_->direct() || ((off | iod->data_len) & off_mask_)) return EMU_XFER_BUFFERED;
  for (uint32_t i = 0; i < iod->nr_vecs; i++) {
    const iovec& v = iod->vecs[i];
    if ((reinterpret_cast<uintptr_t>(v.iov_base) & mem_mask_) | (v.iov_len & off_mask_)) {
      const bool slot_fits = iod->cmd.command_id < depth_ && iod->data_len <= bounce_.slot_size();
      return slot_fits ? EMU_XFER_BOUNCE : EMU_XFER_BUFFERED;
    }
  }
  return EMU_XFER_DIRECT;
}

// nvmet_file_execute_rw()
void EmuQueue::queue_rw(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  const uint64_t slba = nvme_cmd_slba(c);
  const uint32_t nlb = nvme_cmd_nlb(c);
  if (!lba_range_ok(slba, nlb)) [[unlikely]]
    return post(iod, NVME_SC_LBA_RANGE | NVME_STATUS_DNR);
  const uint64_t bytes = uint64_t(nlb) << lba_shift_;
  if (max_transfer_ && bytes > max_transfer_) [[unlikely]]
    return post(iod, NVME_SC_INVALID_FIELD | NVME_STATUS_DNR);
  if (iod->data_len != bytes || !iod->nr_vecs) [[unlikely]]  // nvmet_check_transfer_len()
    return post(iod, NVME_SC_SGL_INVALID_DATA | NVME_STATUS_DNR);

  const bool write = c.opcode == nvme_cmd_write;
  const uint64_t off = slba << lba_shift_;
  if (cache_) {
    if (write && !(c.cdw12 & NVME_RW_FUA) && !ns_->host_fault_every() &&
        cache_->insert(off, iod->vecs, iod->nr_vecs, iod->data_len)) {
      iod->xfer = EMU_XFER_NONE;
      return complete_in_submit(iod, NVME_SC_SUCCESS);
    }
    if (cache_->dirty()) {
      if (write) {
        cache_->wait_written_back();  // a FUA write, or one larger than the cache, lands after what it holds
      } else if (const EmuWriteCache::Overlay o = cache_->overlapping(off, bytes); !o.entries.empty()) {
        return cached_read(iod, off, o);
      }
    }
  }
  if (run_inline()) return execute_inline(iod, EMU_XFER_BUFFERED);  // the caller's memory, any alignment
  iod->xfer = choose_xfer(iod, off);
  iod->pending = 1;
  const int fd = iod->xfer == EMU_XFER_BUFFERED ? EMU_FD_BUFFERED : EMU_FD_DIRECT;
  NVME_TSAN_RELEASE(iod);
  io_uring_sqe* sqe = get_sqe();
  if (iod->xfer == EMU_XFER_BOUNCE) {
    uint8_t* slot = bounce_.slot(c.command_id);
    if (write) {
      copy_from_iovecs(slot, iod->vecs, iod->nr_vecs);
      io_uring_prep_write(sqe, fd, slot, iod->data_len, off);
    } else {
      io_uring_prep_read(sqe, fd, slot, iod->data_len, off);
    }
  } else if (iod->nr_vecs == 1) {
    if (write)
      io_uring_prep_write(sqe, fd, iod->vecs[0].iov_base, iod->data_len, off);
    else
      io_uring_prep_read(sqe, fd, iod->vecs[0].iov_base, iod->data_len, off);
  } else {
    if (write)
      io_uring_prep_writev(sqe, fd, iod->vecs, iod->nr_vecs, off);
    else
      io_uring_prep_readv(sqe, fd, iod->vecs, iod->nr_vecs, off);
  }
  sqe->flags |= IOSQE_FIXED_FILE;
  if (write && (!vwc_ || (c.cdw12 & NVME_RW_FUA))) sqe->rw_flags = RWF_DSYNC;
  io_uring_sqe_set_data(sqe, iod);
}

// nvmet_file_execute_flush(): with no volatile cache there is nothing to make durable.
// nvmet punts every flush to a workqueue; here the submitter runs it (emu_ns.h, inline=).
// The write cache is written back first, and a write it could not put on the file fails the
// flush (a drive reports a lost cached write at the next flush).
void EmuQueue::queue_flush(NvmeIod* iod) {
  if (!vwc_) return post(iod, NVME_SC_SUCCESS);
  if (cache_) {
    cache_->wait_written_back();
    // DNR: the loss is reported once, so a retried flush would succeed over it.
    if (int err = cache_->take_error())
      return post(iod, uint16_t(nvme_status_from_errno(err, nvme_cmd_write) | NVME_STATUS_DNR));
  }
  if (run_flush_inline()) return execute_inline(iod, EMU_XFER_NONE);
  iod->pending = 1;
  iod->xfer = EMU_XFER_NONE;
  NVME_TSAN_RELEASE(iod);
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_fsync(sqe, EMU_FD_BUFFERED, IORING_FSYNC_DATASYNC);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, iod);
}

// nvmet_file_execute_write_zeroes(): fallocate; without a volatile cache, linked to an
// fdatasync so that the zeroes are durable when the command completes.
void EmuQueue::queue_write_zeroes(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  const uint64_t slba = nvme_cmd_slba(c);
  const uint32_t nlb = nvme_cmd_nlb(c);
  if (!lba_range_ok(slba, nlb)) [[unlikely]]
    return post(iod, NVME_SC_LBA_RANGE | NVME_STATUS_DNR);
  if (cache_ && cache_->dirty()) cache_->wait_written_back();  // after the writes the cache holds
  if (run_inline()) return execute_inline(iod, EMU_XFER_NONE);
  const bool sync = !vwc_ || (c.cdw12 & NVME_RW_FUA);
  iod->pending = sync ? 2 : 1;
  iod->xfer = EMU_XFER_NONE;
  NVME_TSAN_RELEASE(iod);
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_fallocate(sqe, EMU_FD_BUFFERED, ns_->zeroes_mode(), slba << lba_shift_, uint64_t(nlb) << lba_shift_);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, iod);
  if (!sync) return;
  sqe->flags |= IOSQE_IO_LINK;
  sqe = get_sqe();
  io_uring_prep_fsync(sqe, EMU_FD_BUFFERED, IORING_FSYNC_DATASYNC);
  sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, iod);
}

// nvmet_file_execute_dsm(): every range is checked before any is deallocated.
void EmuQueue::queue_dsm(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  const unsigned nr = (c.cdw10 & 0xFF) + 1;
  NvmeDsmRange ranges[NVME_DSM_MAX_RANGES];
  if (iod->data_len != nr * sizeof(NvmeDsmRange)) [[unlikely]]
    return post(iod, NVME_SC_SGL_INVALID_DATA | NVME_STATUS_DNR);
  copy_from_iovecs(reinterpret_cast<uint8_t*>(ranges), iod->vecs, iod->nr_vecs);
  unsigned work = 0;
  for (unsigned i = 0; i < nr; i++) {
    if (!lba_range_ok(ranges[i].slba, ranges[i].nlb)) return post(iod, NVME_SC_LBA_RANGE | NVME_STATUS_DNR);
    work += ranges[i].nlb != 0;
  }
  if (!(c.cdw11 & NVME_DSMGMT_AD) || !work) return post(iod, NVME_SC_SUCCESS);  // hints only
  if (cache_ && cache_->dirty()) cache_->wait_written_back();  // after the writes the cache holds
  if (run_inline()) return execute_inline(iod, EMU_XFER_NONE);
  iod->pending = uint16_t(work);
  iod->xfer = EMU_XFER_NONE;
  NVME_TSAN_RELEASE(iod);
  for (unsigned i = 0; i < nr; i++) {
    if (!ranges[i].nlb) continue;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_fallocate(sqe, EMU_FD_BUFFERED, ns_->dealloc_mode(), ranges[i].slba << lba_shift_,
                            uint64_t(ranges[i].nlb) << lba_shift_);
    sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, iod);
  }
}

void EmuQueue::finish(NvmeIod* iod, IoCompBatch* iob, RqList* failed) {
  if (iod->xfer == EMU_XFER_BOUNCE && iod->cmd.opcode == nvme_cmd_read && iod->status == NVME_SC_SUCCESS)
    copy_to_iovecs(iod->vecs, iod->nr_vecs, bounce_.slot(iod->cmd.command_id));
  complete(iod, iod->status, iob, failed);
}

int EmuQueue::inject_host_fault(const NvmeIod* iod, int res, unsigned every) {
  if (res < 0 || ++fault_seen_ % every != 0) return res;
  const EmuHostFault f = ns_->host_fault();
  const bool data = iod->xfer != EMU_XFER_NONE;
  if (f.short_xfer) return data ? int(uint32_t(res) / 2 >> lba_shift_ << lba_shift_) : res;
  return f.res;
}

// The whole command again with plain system calls, on the reaping thread (see the top of this
// file). Only after every sub-operation has completed: nothing of it is still in flight.
uint16_t EmuQueue::execute_sync(NvmeIod* iod) {
  ns_->count_host_retry();
  return run_sync(iod);
}

// A checked command, whole, with plain system calls on the calling thread.
uint16_t EmuQueue::run_sync(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  const int fd = ns_->buffered_fd();
  // A system call that is interrupted or told "not now" is tried again, a bounded number of
  // times; its own errno otherwise.
  const auto call = [](auto&& fn) -> int {
    for (int tries = 0;; tries++) {
      if (fn() == 0) return 0;
      const int err = errno;
      if (!host_transient(-err) || tries >= 1000) return -err;
      if (err != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  switch (c.opcode) {
    case nvme_cmd_read:
    case nvme_cmd_write:
      return sync_rw(iod);
    case nvme_cmd_flush:
      return nvme_status_from_errno(call([&] { return fdatasync(fd); }), c.opcode);
    case nvme_cmd_write_zeroes: {
      const off_t off = off_t(nvme_cmd_slba(c) << lba_shift_), len = off_t(uint64_t(nvme_cmd_nlb(c)) << lba_shift_);
      int err = call([&] { return fallocate(fd, ns_->zeroes_mode(), off, len); });
      if (!err && (!vwc_ || (c.cdw12 & NVME_RW_FUA))) err = call([&] { return fdatasync(fd); });
      return nvme_status_from_errno(err, c.opcode);
    }
    case nvme_cmd_dsm: {
      NvmeDsmRange ranges[NVME_DSM_MAX_RANGES];
      const unsigned nr = (c.cdw10 & 0xFF) + 1;
      copy_from_iovecs(reinterpret_cast<uint8_t*>(ranges), iod->vecs, iod->nr_vecs);
      for (unsigned i = 0; i < nr; i++) {
        if (!ranges[i].nlb) continue;
        const off_t off = off_t(ranges[i].slba << lba_shift_), len = off_t(uint64_t(ranges[i].nlb) << lba_shift_);
        if (int err = call([&] { return fallocate(fd, ns_->dealloc_mode(), off, len); }))
          return nvme_status_from_errno(err, c.opcode);
      }
      return NVME_SC_SUCCESS;
    }
    default:
      return NVME_SC_INTERNAL;
  }
}

// A read or write moved whole with preadv/pwritev2, continuing after short counts. O_DIRECT
// while the rest stays aligned as it was when the command chose it; the page cache for the
// rest once a short count has left it unaligned.
uint16_t EmuQueue::sync_rw(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  const bool write = c.opcode == nvme_cmd_write;
  const uint64_t off = nvme_cmd_slba(c) << lba_shift_;
  const int flags = write && (!vwc_ || (c.cdw12 & NVME_RW_FUA)) ? RWF_DSYNC : 0;
  iovec vecs[NVME_MAX_SEGS];
  unsigned nr;
  if (iod->xfer == EMU_XFER_BOUNCE) {  // a write's data is in the slot already
    vecs[0] = iovec{bounce_.slot(c.command_id), iod->data_len};
    nr = 1;
  } else {
    nr = iod->nr_vecs;
    std::memcpy(vecs, iod->vecs, nr * sizeof(iovec));
  }
  int fd = iod->xfer == EMU_XFER_BUFFERED || !ns_->direct() ? ns_->buffered_fd() : ns_->direct_fd();
  iovec* v = vecs;
  uint64_t done = 0;
  for (int tries = 0; done < iod->data_len;) {
    const ssize_t n = write ? pwritev2(fd, v, int(nr), off_t(off + done), flags) : preadv(fd, v, int(nr), off_t(off + done));
    if (n < 0) {
      const int err = errno;
      if (host_transient(-err) && tries++ < 1000) {
        if (err != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (err == EINVAL && fd != ns_->buffered_fd()) {  // O_DIRECT refused the rest
        fd = ns_->buffered_fd();
        continue;
      }
      return nvme_status_from_errno(-err, c.opcode);
    }
    if (n == 0) return NVME_SC_DATA_XFER_ERROR;  // the file ended before the command: it shrank under us
    done += uint64_t(n);
    for (size_t left = size_t(n); left;) {  // step the vecs past what moved
      const size_t step = std::min(left, v->iov_len);
      v->iov_base = static_cast<uint8_t*>(v->iov_base) + step;
      v->iov_len -= step;
      left -= step;
      if (!v->iov_len) v++, nr--;
    }
    if (done < iod->data_len) fd = ns_->buffered_fd();  // a short count: the rest may be unaligned
  }
  return NVME_SC_SUCCESS;
}

int EmuQueue::reap(IoCompBatch* iob, RqList* failed) {
  int n = 0;
  for (Request* rq = done_.exchange(nullptr, std::memory_order_acquire); rq; n++) {
    Request* next = rq->rq_next;
    rq->rq_next = nullptr;
    finish(nvme_iod(rq), iob, failed);
    rq = next;
  }
  return n + uring_reap(&ring_, [&](void* data, int res) {
    auto* iod = static_cast<NvmeIod*>(data);
    NVME_TSAN_ACQUIRE(iod);
    if (const unsigned every = ns_->host_fault_every(); every && iod->xfer != EMU_XFER_POSTED) [[unlikely]]
      res = inject_host_fault(iod, res, every);
    if (iod->status == NVME_SC_SUCCESS && iod->xfer != EMU_XFER_POSTED) [[likely]] {
      if (res < 0) {
        if (host_transient(res)) iod->redo = 1;
        else iod->status = nvme_status_from_errno(res, iod->cmd.opcode);
      } else if (iod->xfer != EMU_XFER_NONE && uint32_t(res) != iod->data_len) {
        iod->redo = 1;  // short: done again whole; a file that ended still fails it there
      }
    }
    if (--iod->pending != 0) return 0;  // one command may take several file operations
    if (iod->redo && iod->status == NVME_SC_SUCCESS) [[unlikely]]
      iod->status = execute_sync(iod);
    finish(iod, iob, failed);
    return 1;
  });
}

}  // namespace

Status make_emu_queue(EmuNamespace* ns, const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) {
  out->reset();
  auto q = std::make_unique<EmuQueue>(ns, p);
  if (Status s = q->init(p); !s.ok()) return s;
  *out = std::move(q);
  return Status();
}

}  // namespace biofs
