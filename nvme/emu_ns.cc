// Counterpart of the NVMe target's namespace set-up for its file and block back-ends
// (drivers/nvme/target/io-cmd-file.c nvmet_file_ns_enable, io-cmd-bdev.c) and of Identify in
// drivers/nvme/target/admin-cmd.c (nvmet_execute_identify_ctrl / _ns).
#include "emu_ns.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace biofs {

Status make_emu_queue(EmuNamespace* ns, const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out);  // emu_queue.cc

// One line naming the backing file, "emu:PATH: what[: strerror(err)]", of the kind `make` makes
// (Status::not_found, ...).
static Status emu_error(Status (*make)(std::string), const EmuConfig& cfg, const std::string& what, int err = 0) {
  std::string msg = "emu:" + cfg.path + ": " + what;
  if (err) msg += std::string(": ") + std::strerror(err);
  return make(std::move(msg));
}

Status EmuNamespace::open(const EmuConfig& cfg, std::unique_ptr<EmuNamespace>* out) {
  out->reset();
  std::unique_ptr<EmuNamespace> ns(new EmuNamespace(cfg));
  if (Status s = ns->init(); !s.ok()) return s;
  *out = std::move(ns);
  return Status();
}

Status EmuNamespace::init() {
  if (cfg_.lba_size != 512 && cfg_.lba_size != 4096)
    return emu_error(Status::invalid_argument, cfg_,
                     "lba=" + std::to_string(cfg_.lba_size) + ": expected 512 or 4096");
  if (cfg_.mdts > 10)
    return emu_error(Status::invalid_argument, cfg_, "mdts=" + std::to_string(cfg_.mdts) + ": expected 0..10");
  lba_shift_ = cfg_.lba_size == 4096 ? 12 : 9;

  if (cfg_.create_size) {
    const int fd = ::open(cfg_.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const int rc = ftruncate(fd, off_t(cfg_.create_size));
      const int err = errno;
      close(fd);
      if (rc) {
        unlink(cfg_.path.c_str());
        return emu_error(Status::io_error, cfg_,
                         "cannot size the new file to " + std::to_string(cfg_.create_size) + " bytes", err);
      }
    } else if (errno != EEXIST) {
      return emu_error(Status::io_error, cfg_, "cannot create the backing file", errno);
    }
  }
  buffered_fd_ = ::open(cfg_.path.c_str(), O_RDWR | O_CLOEXEC);
  if (buffered_fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) return emu_error(Status::not_found, cfg_, "no such file (add ,size=SIZE to create it)");
    if (err == EACCES || err == EPERM)
      return emu_error(Status::io_error, cfg_, "no permission to open it for reading and writing", err);
    if (err == EISDIR)
      return emu_error(Status::invalid_argument, cfg_, "a directory, not a regular file or a block device");
    return emu_error(Status::io_error, cfg_, "cannot open", err);
  }
  struct stat st;
  if (fstat(buffered_fd_, &st)) return emu_error(Status::io_error, cfg_, "cannot stat", errno);
  uint64_t bytes = 0;
  if (S_ISREG(st.st_mode)) {
    bytes = uint64_t(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    block_device_ = true;
    if (ioctl(buffered_fd_, BLKGETSIZE64, &bytes))
      return emu_error(Status::io_error, cfg_, "BLKGETSIZE64 failed", errno);
  } else {
    return emu_error(Status::invalid_argument, cfg_, "not a regular file or a block device");
  }
  nlba_ = bytes >> lba_shift_;
  if (!nlba_)
    return emu_error(Status::invalid_argument, cfg_,
                     std::to_string(bytes) + " bytes is less than one " + std::to_string(cfg_.lba_size) +
                         "-byte block (add ,size=SIZE to a new path to create one)");

  // Write Zeroes keeps the blocks allocated; deallocate punches them out. tmpfs has no
  // ZERO_RANGE: a punched hole reads as zeroes there too.
  dealloc_mode_ = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
  zeroes_mode_ = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
  struct statfs sfs;
  if (!block_device_ && fstatfs(buffered_fd_, &sfs) == 0) {
    if (sfs.f_type == TMPFS_MAGIC) zeroes_mode_ = dealloc_mode_;
    memory_backed_ = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
  }
  inline_io_ = cfg_.inline_io == EmuInline::on || (cfg_.inline_io == EmuInline::automatic && memory_backed_);

  if (!cfg_.buffered) {
    direct_fd_ = ::open(cfg_.path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
    if (direct_fd_ >= 0) {
      struct statx sx;
      if (statx(direct_fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        dio_mem_align_ = sx.stx_dio_mem_align;
        dio_offset_align_ = sx.stx_dio_offset_align;
      } else if (block_device_) {  // kernels before bdev STATX_DIOALIGN: the sector size
        int ssz = 512;
        ioctl(direct_fd_, BLKSSZGET, &ssz);
        dio_mem_align_ = dio_offset_align_ = uint32_t(ssz);
      } else {  // unknown: the safe choice
        dio_mem_align_ = dio_offset_align_ = 4096;
      }
      if (!dio_mem_align_ || !dio_offset_align_) {  // the file system has no O_DIRECT
        close(direct_fd_);
        direct_fd_ = -1;
        dio_mem_align_ = dio_offset_align_ = 0;
      }
    }
  }
  set_host_fault(cfg_.host_fault);
  if (cfg_.powercut.enabled) {
    powercut_ = std::make_unique<EmuPowerCut>(cfg_.powercut, buffered_fd_, lba_shift_, nlba_, cfg_.vwc);
  } else if (cfg_.vwc && cfg_.write_cache_bytes && !inline_io_) {
    // The cache's own io_uring ring: the system may refuse one.
    if (Status s = EmuWriteCache::create(name(), direct_fd_, buffered_fd_, dio_offset_align_,
                                         std::max<uint64_t>(cfg_.write_cache_bytes, max_transfer()), &write_cache_);
        !s.ok())
      return s;
  }
  return Status();
}

EmuNamespace::~EmuNamespace() {
  write_cache_.reset();  // everything written back first
  if (direct_fd_ >= 0) close(direct_fd_);
  if (buffered_fd_ >= 0) close(buffered_fd_);
}

// Space-padded ASCII, as Identify's string fields are.
static void put_string(char* dst, size_t len, const std::string& s) {
  std::memset(dst, ' ', len);
  std::memcpy(dst, s.data(), std::min(len, s.size()));
}

void EmuNamespace::identify_ctrl(NvmeIdCtrl* id) const {
  std::memset(id, 0, sizeof(*id));
  put_string(id->sn, sizeof(id->sn), "biofs-emu");
  put_string(id->mn, sizeof(id->mn), "biofs emulated NVMe namespace");
  put_string(id->fr, sizeof(id->fr), "0.1");
  id->mdts = uint8_t(cfg_.mdts);
  id->cntlid = 1;
  id->ver = 0x00010400;  // NVMe 1.4
  id->sqes = 0x66;       // 64-byte entries
  id->cqes = 0x44;       // 16-byte entries
  id->nn = 1;
  id->oncs = NVME_CTRL_ONCS_DSM | NVME_CTRL_ONCS_WRITE_ZEROES;
  id->vwc = cfg_.vwc ? NVME_CTRL_VWC_PRESENT : 0;
  const std::string nqn = "nqn.2024-01.io.biofs:emu";
  std::memcpy(id->subnqn, nqn.data(), nqn.size());
}

void EmuNamespace::identify_ns(NvmeIdNs* id) const {
  std::memset(id, 0, sizeof(*id));
  id->nsze = id->ncap = id->nuse = nlba_;
  id->nlbaf = 1;  // two formats (0-based): 512 and 4096 bytes, no metadata
  id->lbaf[0] = NvmeLbaf{0, 9, 0};
  id->lbaf[1] = NvmeLbaf{0, 12, 0};
  id->flbas = lba_shift_ == 12 ? 1 : 0;
  id->dlfeat = 0x1;  // deallocated blocks read as zeroes (a punched hole does)
}

int EmuNamespace::admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) {
  if (cmd.opcode != nvme_admin_identify) return NVME_SC_INVALID_OPCODE | NVME_STATUS_DNR;
  if (len < NVME_IDENTIFY_DATA_SIZE) return NVME_SC_SGL_INVALID_DATA | NVME_STATUS_DNR;
  switch (cmd.cdw10 & 0xFF) {
    case NVME_ID_CNS_CTRL:
      identify_ctrl(static_cast<NvmeIdCtrl*>(data));
      return NVME_SC_SUCCESS;
    case NVME_ID_CNS_NS:
      if (cmd.nsid != nsid()) return NVME_SC_INVALID_NS | NVME_STATUS_DNR;
      identify_ns(static_cast<NvmeIdNs*>(data));
      return NVME_SC_SUCCESS;
    default:
      return NVME_SC_INVALID_FIELD | NVME_STATUS_DNR;
  }
}

Status EmuNamespace::create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) {
  return make_emu_queue(this, p, out);
}

}  // namespace biofs
