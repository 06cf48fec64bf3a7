// Counterpart of the user side of drivers/nvme/host/ioctl.c: nvme_ns_chr_uring_cmd() takes
// what this file sends.
#include "uring_passthru.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "bounce.h"
#include "uring_util.h"

namespace biofs {
namespace {

enum : uint8_t { PT_XFER_USER = 0, PT_XFER_FIXED = 1 };

}  // namespace

bool uring_passthru_prep_sqe(io_uring_sqe* sqe, NvmeIod* iod, int fd, bool regfiles, const BounceArena& fixed,
                             unsigned depth) {
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // SQE128
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  if (regfiles) sqe->flags |= IOSQE_FIXED_FILE;
  auto* cmd = reinterpret_cast<nvme_uring_cmd*>(sqe->cmd);
  nvme_uring_cmd_prep(iod->cmd, iod->vecs, iod->nr_vecs, cmd, &sqe->cmd_op);
  iod->xfer = PT_XFER_USER;
  const uint8_t op = iod->cmd.opcode;
  if (fixed.ready() && (op == nvme_cmd_read || op == nvme_cmd_write) && iod->cmd.command_id < depth &&
      iod->data_len <= fixed.slot_size()) {
    uint8_t* slot = fixed.slot(iod->cmd.command_id);
    if (op == nvme_cmd_write) copy_from_iovecs(slot, iod->vecs, iod->nr_vecs);
    cmd->addr = reinterpret_cast<uintptr_t>(slot);
    cmd->data_len = iod->data_len;
    sqe->cmd_op = NVME_URING_CMD_IO;
    sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
    sqe->buf_index = 0;
    iod->xfer = PT_XFER_FIXED;
  }
  io_uring_sqe_set_data(sqe, iod);
  return iod->xfer == PT_XFER_FIXED;
}

uint16_t uring_passthru_cqe_status(NvmeIod* iod, int res, const BounceArena& fixed) {
  // res: 0, the NVMe status field (> 0), or -errno when the host side failed. A host error
  // becomes a status that the driver retries where a retry may help (-EINTR, -EAGAIN,
  // -EIO: no DNR) and not where it cannot (-EINVAL, -ENOSPC: DNR), nvme_status_from_errno.
  const uint16_t status = res >= 0 ? uint16_t(res) : nvme_status_from_errno(res, iod->cmd.opcode);
  if (iod->xfer == PT_XFER_FIXED && iod->cmd.opcode == nvme_cmd_read && status == NVME_SC_SUCCESS)
    copy_to_iovecs(iod->vecs, iod->nr_vecs, fixed.slot(iod->cmd.command_id));
  return status;
}

namespace {

class UringQueue final : public NvmeQueue {
 public:
  UringQueue(UringPassthru* t, const NvmeQueueParams& p);
  ~UringQueue() override {
    if (ring_up_) io_uring_queue_exit(&ring_);
  }
  // The ring, its registered file and buffers; the destructor undoes what was set up.
  Status init(UringPassthru* t, const NvmeQueueParams& p);

  void submit(RqList* rqs, bool commit) override;
  void commit() override { uring_submit(&ring_); }
  int reap(IoCompBatch* iob, RqList* failed) override;
  void wait() override { uring_wait(&ring_); }
  void wake() override;
  int completion_fd() const override { return (ring_.flags & IORING_SETUP_IOPOLL) ? -1 : ring_.ring_fd; }

  Status probe(const NvmeQueueParams& p);
  Status probe_read(const NvmeQueueParams& p, void* buf, size_t len, bool fixed, int* res);

 private:
  void prep(io_uring_sqe* sqe, NvmeIod* iod);
  io_uring_sqe* get_sqe();

  io_uring ring_;
  bool ring_up_ = false;  // init() set up ring_
  BounceArena fixed_;  // registered buffer 0: one slot per command id
  const int fd_;       // the descriptor or, with regfiles, index 0
  const bool regfiles_, sqpoll_;
  const unsigned depth_;
};

UringQueue::UringQueue(UringPassthru* t, const NvmeQueueParams& p)
    : NvmeQueue(t->name() + " q" + std::to_string(p.qid)),
      fd_(t->config().regfiles ? 0 : t->fd()),
      regfiles_(t->config().regfiles),
      sqpoll_(t->config().sqpoll),
      depth_(p.depth) {}

Status UringQueue::init(UringPassthru* t, const NvmeQueueParams& p) {
  const UringPassthruConfig& cfg = t->config();
  io_uring_params params{};
  params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32 | IORING_SETUP_CLAMP;
  // As nvme-pci's queue maps: only a poll queue completes by polling (HCTX_TYPE_POLL). A default
  // queue keeps its interrupt, so the completion thread that sleeps in it is woken by the
  // kernel; an IOPOLL ring there would have it spin in io_iopoll_check() holding the ring's
  // uring_lock, which the submitters and the task work that completes their commands wait for.
  if (cfg.iopoll && p.polled) params.flags |= IORING_SETUP_IOPOLL;
  if (cfg.sqpoll) {
    params.flags |= IORING_SETUP_SQPOLL;
    params.sq_thread_idle = cfg.sq_thread_idle_ms;
  }
  const std::string err = uring_init(&ring_, std::max(2 * p.depth, 64u), &params, 0, name_);
  if (!err.empty()) return Status::io_error(err);
  ring_up_ = true;
  io_uring_probe* probe = io_uring_get_probe_ring(&ring_);
  const bool has_cmd = probe && io_uring_opcode_supported(probe, IORING_OP_URING_CMD);
  if (probe) io_uring_free_probe(probe);
  auto fail = [&](const std::string& msg) { return Status::io_error(name_ + ": " + msg); };
  if (!has_cmd) return fail("this kernel's io_uring has no IORING_OP_URING_CMD (NVMe passthrough needs Linux 5.19 or later)");
  if (regfiles_) {
    const int fd = t->fd();
    if (int ret = io_uring_register_files(&ring_, &fd, 1); ret < 0)
      return fail(std::string("registering the device with io_uring failed: ") + std::strerror(-ret));
  }
  if (cfg.fixedbufs) {
    if (Status s = fixed_.init(p.depth, p.max_transfer); !s.ok()) return fail(s.message());
    const iovec region{fixed_.base(), fixed_.bytes()};
    if (int ret = io_uring_register_buffers(&ring_, &region, 1); ret < 0)
      return fail("registering " + std::to_string(fixed_.bytes() >> 20) + " MiB of fixed buffers failed: " +
                  std::strerror(-ret) + (ret == -ENOMEM ? " (raise RLIMIT_MEMLOCK)" : ""));
  }
  return Status();
}

void UringQueue::prep(io_uring_sqe* sqe, NvmeIod* iod) {
  if (uring_passthru_prep_sqe(sqe, iod, fd_, regfiles_, fixed_, depth_)) count_fixed_buffer_cmd();
}

io_uring_sqe* UringQueue::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe && !sqpoll_) {  // without SQPOLL a submit empties the ring
    uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void UringQueue::submit(RqList* rqs, bool commit) {
  while (Request* rq = rqs->peek()) {
    io_uring_sqe* sqe = get_sqe();
    if (!sqe) break;  // SQPOLL ring full: the rest stay with the caller
    rqs->pop();
    NvmeIod* iod = nvme_iod(rq);
    prep(sqe, iod);
    NVME_TSAN_RELEASE(iod);
  }
  if (commit) uring_submit(&ring_);
}

void UringQueue::wake() {
  io_uring_sqe* sqe = get_sqe();
  for (int i = 0; !sqe && i < 1000000; i++) {
    uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  if (!sqe) return;
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data(sqe, nullptr);
  uring_submit(&ring_);
}

int UringQueue::reap(IoCompBatch* iob, RqList* failed) {
  return uring_reap(&ring_, [&](void* data, int res) {
    auto* iod = static_cast<NvmeIod*>(data);
    NVME_TSAN_ACQUIRE(iod);
    if (res < 0) [[unlikely]]  // the host side failed: say why, the NVMe status cannot
      std::fprintf(stderr, "%s: cid=%u: the kernel failed the command: %s\n", name_.c_str(),
                   unsigned(iod->cmd.command_id), std::strerror(-res));
    complete(iod, uring_passthru_cqe_status(iod, res, fixed_), iob, failed);
    return 1;
  });
}

// Sends one read of LBA 0 (into `buf`, or through the registered buffer with `fixed`) and
// waits for it: the CQE's res in *res. An error only if the read could not be sent.
Status UringQueue::probe_read(const NvmeQueueParams& p, void* buf, size_t len, bool fixed, int* res) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) return Status::io_error(name_ + ": a new ring has no free entry");
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd_;
  if (regfiles_) sqe->flags |= IOSQE_FIXED_FILE;
  NvmeCommand c{};
  c.opcode = nvme_cmd_read;
  c.nsid = p.nsid;
  const iovec v{buf, len};
  auto* cmd = reinterpret_cast<nvme_uring_cmd*>(sqe->cmd);
  nvme_uring_cmd_prep(c, &v, 1, cmd, &sqe->cmd_op);
  if (fixed) {
    cmd->addr = reinterpret_cast<uintptr_t>(buf);
    cmd->data_len = uint32_t(len);
    sqe->cmd_op = NVME_URING_CMD_IO;
    sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
    sqe->buf_index = 0;
  }
  io_uring_sqe_set_data(sqe, nullptr);
  int ret = uring_submit(&ring_);
  io_uring_cqe* cqe = nullptr;
  if (ret >= 0) ret = io_uring_wait_cqe(&ring_, &cqe);
  *res = ret < 0 ? ret : cqe->res;
  if (cqe) io_uring_cqe_seen(&ring_, cqe);
  return Status();
}

// One read of LBA 0: turns "no passthrough here" into a start-up error instead of failed I/O;
// with fixedbufs, a second read through the registered buffer does the same for
// IORING_URING_CMD_FIXED (Debian 12's 6.1 kernel answers it with EINVAL).
Status UringQueue::probe(const NvmeQueueParams& p) {
  const size_t len = size_t(1) << p.lba_shift;
  void* buf = std::aligned_alloc(4096, std::max<size_t>(len, 4096));
  int res = 0;
  const Status sent = probe_read(p, buf, len, false, &res);
  std::free(buf);
  if (!sent.ok()) return sent;
  if (res == 0) {
    if (!fixed_.ready()) return Status();
    int fres = 0;
    if (Status s = probe_read(p, fixed_.slot(0), len, true, &fres); !s.ok()) return s;
    if (fres == 0) return Status();
    return Status::io_error(name_ + ": fixed buffers: a test read with IORING_URING_CMD_FIXED failed: " +
                            (fres < 0 ? std::string(std::strerror(-fres)) : nvme_status_describe(uint16_t(fres))) +
                            " (this kernel does not take registered buffers for NVMe passthrough; drop fixedbufs)");
  }
  if (res > 0)
    return Status::io_error(name_ + ": a test read of LBA 0 failed: " + nvme_status_describe(uint16_t(res)));
  std::string msg = name_ + ": a test read through IORING_OP_URING_CMD failed: " + std::strerror(-res);
  if (res == -EOPNOTSUPP || res == -EINVAL)
    msg += ring_.flags & IORING_SETUP_IOPOLL
               ? " (iopoll needs the device's poll queues: load nvme with poll_queues=N)"
               : " (this kernel does not offer NVMe passthrough on io_uring: Linux 5.19 or later)";
  else if (res == -EACCES || res == -EPERM)
    msg += " (no permission for this command)";
  return Status::io_error(msg);
}

// The controller behind /dev/ngXnY: sysfs's nvme-generic/ngXnY/device is the controller, or with
// native multipath the subsystem, whose controllers are its nvme* entries. "pcie" when unknown.
std::string read_kernel_transport(const std::string& path) {
  const std::string dev = "/sys/class/nvme-generic/" + path.substr(path.rfind('/') + 1) + "/device";
  auto read_line = [](const std::string& file) {
    std::string line;
    std::getline(std::ifstream(file), line);
    return line;
  };
  if (std::string t = read_line(dev + "/transport"); !t.empty()) return t;
  if (DIR* d = opendir(dev.c_str())) {
    std::string t;
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "nvme", 4) == 0 && t.empty()) t = read_line(dev + "/" + e->d_name + "/transport");
    closedir(d);
    if (!t.empty()) return t;
  }
  return "pcie";
}

}  // namespace

Status UringPassthru::open(const UringPassthruConfig& cfg, std::unique_ptr<UringPassthru>* out) {
  out->reset();
  std::unique_ptr<UringPassthru> t(new UringPassthru(cfg));
  if (Status s = t->init(); !s.ok()) return s;
  *out = std::move(t);
  return Status();
}

Status UringPassthru::init() {
  const std::string where = "nvme:" + cfg_.path;
  struct stat st;
  if (stat(cfg_.path.c_str(), &st)) {
    const int err = errno;
    if (err == ENOENT)
      return Status::not_found(where + ": no such device (is the nvme driver loaded? see ls /dev/ng*)");
    return Status::io_error(where + ": " + std::strerror(err));
  }
  if (S_ISBLK(st.st_mode))
    return Status::invalid_argument(where + ": a block device; passthrough needs the generic char device /dev/ngXnY "
                                            "(emu:" + cfg_.path + " uses the block device)");
  if (!S_ISCHR(st.st_mode))
    return Status::invalid_argument(where + ": not an NVMe generic char device (/dev/ngXnY)");
  fd_ = ::open(cfg_.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (err == EACCES || err == EPERM)
      return Status::io_error(where + ": no permission to open it for reading and writing (root, or a udev rule for "
                                      "the ng device)");
    return Status::io_error(where + ": cannot open: " + std::strerror(err));
  }
  const int id = ioctl(fd_, NVME_IOCTL_ID);
  if (id <= 0) {
    const int err = errno;
    return Status::invalid_argument(where + ": not an NVMe namespace (NVME_IOCTL_ID: " + std::strerror(err) + ")");
  }
  nsid_ = uint32_t(id);
  kernel_transport_ = read_kernel_transport(cfg_.path);
  return Status();
}

UringPassthru::~UringPassthru() {
  if (fd_ >= 0) close(fd_);
}

int UringPassthru::admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) {
  nvme_admin_cmd a{};
  a.opcode = cmd.opcode;
  a.nsid = cmd.nsid;
  a.cdw10 = cmd.cdw10;
  a.cdw11 = cmd.cdw11;
  a.addr = reinterpret_cast<uintptr_t>(data);
  a.data_len = len;
  const int ret = ioctl(fd_, NVME_IOCTL_ADMIN_CMD, &a);
  if (ret < 0) return -errno;  // the ioctl itself failed; > 0 is the NVMe status
  return int(uint16_t(ret));
}

Status UringPassthru::create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) {
  out->reset();
  auto q = std::make_unique<UringQueue>(this, p);
  if (Status s = q->init(this, p); !s.ok()) return s;
  // The first queue, and with iopoll the first IOPOLL one (a kernel device without poll queues
  // refuses polled commands).
  if (p.qid == 1 || (cfg_.iopoll && p.polled && !probed_polled_)) {
    if (Status s = q->probe(p); !s.ok()) return s;
    probed_polled_ = probed_polled_ || p.polled;
  }
  *out = std::move(q);
  return Status();
}

}  // namespace biofs
