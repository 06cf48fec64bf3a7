// Counterpart of the NVMe target's command execution for the file back-end
// (drivers/nvme/target/io-cmd-file.c: nvmet_file_parse_io_cmd, nvmet_file_execute_rw,
// _flush, _dsm, _write_zeroes) and of its I/O command checks (nvmet_check_transfer_len,
// the LBA range check): one emulated I/O queue pair, executed through one io_uring.
//
// Every command completes through the ring: commands that fail the controller's checks post
// their status through a NOP, so a completion always comes from the reaper, as from hardware.
#include <linux/fs.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

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
};
enum : int { EMU_FD_DIRECT = 0, EMU_FD_BUFFERED = 1 };  // registered file indexes

class EmuQueue final : public NvmeQueue {
 public:
  EmuQueue(EmuNamespace* ns, const NvmeQueueParams& p);
  ~EmuQueue() override { io_uring_queue_exit(&ring_); }

  void submit(RqList* rqs, bool commit) override;
  void commit() override { uring_submit(&ring_); }
  int reap(IoCompBatch* iob, RqList* failed) override;
  void wait() override { uring_wait(&ring_); }
  void wake() override;

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

  EmuNamespace* ns_;
  io_uring ring_;
  BounceArena bounce_;
  const uint32_t nsid_;
  const unsigned lba_shift_;
  const uint64_t nlba_;
  const uint32_t max_transfer_;  // 0: no MDTS
  const unsigned depth_;
  const bool vwc_;
  const uint32_t mem_mask_, off_mask_;  // O_DIRECT alignment masks (direct fd only)
  EmuPowerCut* const powercut_;  // power-cut emulation: every command runs in it, synchronously
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
      mem_mask_(ns->direct() ? ns->dio_mem_align() - 1 : 0),
      off_mask_(ns->direct() ? ns->dio_offset_align() - 1 : 0),
      powercut_(ns->powercut()) {
  io_uring_params params{};
  params.flags = IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL;
  const std::string err = uring_init(&ring_, std::max(2 * p.depth, 64u), &params, IORING_SETUP_SUBMIT_ALL, name_);
  if (!err.empty()) throw std::runtime_error(err);
  const int fds[2] = {ns->direct() ? ns->direct_fd() : ns->buffered_fd(), ns->buffered_fd()};
  if (int ret = io_uring_register_files(&ring_, fds, 2); ret < 0) {
    io_uring_queue_exit(&ring_);
    throw std::runtime_error(name_ + ": registering the backing file with io_uring failed: " + std::strerror(-ret));
  }
  if (ns->direct()) {
    try {
      bounce_.init(p.depth, p.max_transfer ? p.max_transfer : 4u << 20);
    } catch (const std::exception& e) {
      io_uring_queue_exit(&ring_);
      throw std::runtime_error(name_ + ": " + e.what());
    }
  }
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
  iod->xfer = EMU_XFER_NONE;
  NVME_TSAN_RELEASE(iod);
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data(sqe, iod);
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
    // After the last access: the command goes to the kernel with a later submit. (The
    // releases inside cover commands whose first SQEs may be submitted while they are built.)
    NVME_TSAN_RELEASE(iod);
  }
  if (commit) uring_submit(&ring_);
}

// nvmet_file_parse_io_cmd()
void EmuQueue::queue_cmd(NvmeIod* iod) {
  iod->status = NVME_SC_SUCCESS;
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
void EmuQueue::queue_flush(NvmeIod* iod) {
  if (!vwc_) return post(iod, NVME_SC_SUCCESS);
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

int EmuQueue::reap(IoCompBatch* iob, RqList* failed) {
  return uring_reap(&ring_, [&](void* data, int res) {
    auto* iod = static_cast<NvmeIod*>(data);
    NVME_TSAN_ACQUIRE(iod);
    if (iod->status == NVME_SC_SUCCESS) [[likely]] {
      if (res < 0)
        iod->status = nvme_status_from_errno(res, iod->cmd.opcode);
      else if (iod->xfer != EMU_XFER_NONE && uint32_t(res) != iod->data_len)
        iod->status = NVME_SC_DATA_XFER_ERROR;  // short transfer: the file shrank under us
    }
    if (--iod->pending != 0) return 0;  // one command may take several file operations
    finish(iod, iob, failed);
    return 1;
  });
}

}  // namespace

std::unique_ptr<NvmeQueue> make_emu_queue(EmuNamespace* ns, const NvmeQueueParams& p) {
  return std::make_unique<EmuQueue>(ns, p);
}

}  // namespace biofs
