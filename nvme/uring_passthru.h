// The uring passthrough transport (`nvme:/dev/ngXnY`): NVMe commands sent to a real namespace
// through its generic char device with IORING_OP_URING_CMD, the user side of
// drivers/nvme/host/ioctl.c (nvme_ns_chr_uring_cmd, nvme_uring_cmd_io). One io_uring per
// hardware queue, created with IORING_SETUP_SQE128 | IORING_SETUP_CQE32; each command goes as
// NVME_URING_CMD_IO (one data segment) or NVME_URING_CMD_IO_VEC (several), and its NVMe status
// comes back in the 32-byte CQE's res (-errno when the host failed it). big_cqe[0] carries the
// completion's result dword (nvme_uring_cmd_end_io); no command biofs sends has one (Zone
// Append's LBA would be), so it is not read.
//
// Discovery uses the kernel's NVMe ioctls on the same char device: NVME_IOCTL_ID for the
// namespace id and NVME_IOCTL_ADMIN_CMD for Identify (allowed without CAP_SYS_ADMIN).
//
// Options: `regfiles` registers the device with each ring (IOSQE_FIXED_FILE); `fixedbufs`
// moves data through a registered, page-aligned slot per command (IORING_URING_CMD_FIXED;
// a copy in and out, pinned once instead of per I/O); `iopoll` creates IOPOLL rings for the
// poll queues (the kernel device needs poll queues: nvme.poll_queues=N), the default queues
// keep interrupt completions; `sqpoll` gives each ring a kernel submission
// thread.
#pragma once

#include <string>

#include "lib/status.h"
#include "nvme_transport.h"

struct io_uring_sqe;

namespace biofs {

class BounceArena;
struct NvmeIod;

// The two steps of a passthrough command that touch the ring's entries, as UringQueue runs them,
// here so that a test runs them on the host (tests/nvme/uring_passthru_test.cc); the rest needs
// a kernel with an NVMe generic char device (tests/qemu/passthrough_guest_test.cc).
// Fills the SQE128 for iod: IORING_OP_URING_CMD on fd (an index with regfiles), the command
// and its data vecs. A read or write whose command id is below depth and whose data fits a slot
// of `fixed` (when ready) goes through the registered buffer instead: slot `command_id` of
// buffer index 0 (the one region registered), IORING_URING_CMD_FIXED, one segment
// (NVME_URING_CMD_IO), a write's data copied into the slot first. Returns whether it did.
bool uring_passthru_prep_sqe(io_uring_sqe* sqe, NvmeIod* iod, int fd, bool regfiles, const BounceArena& fixed,
                             unsigned depth);
// Decodes a CQE's res for iod: 0 or the NVMe status field as is, a negative res (-errno: the
// host failed the command) through nvme_status_from_errno(); a read that came through the
// registered buffer and succeeded has its data copied from its slot into its vecs.
uint16_t uring_passthru_cqe_status(NvmeIod* iod, int res, const BounceArena& fixed);

struct UringPassthruConfig {
  std::string path;
  bool regfiles = false;
  bool fixedbufs = false;
  bool iopoll = false;
  bool sqpoll = false;
  unsigned sq_thread_idle_ms = 100;
};

class UringPassthru final : public NvmeTransport {
 public:
  // Opens the char device into *out and learns its namespace id. Ok, or one line: not_found
  // for a missing device, invalid_argument for one that is not an NVMe generic char device,
  // io_error when it cannot be opened (no permission).
  static Status open(const UringPassthruConfig& cfg, std::unique_ptr<UringPassthru>* out);
  ~UringPassthru() override;

  std::string name() const override { return "nvme:" + cfg_.path; }
  uint32_t nsid() const override { return nsid_; }
  // nvme-pci's NVME_MAX_SEGS; a fabric's kernel queue takes up to USHRT_MAX segments.
  uint32_t max_user_pages() const override { return fabric() ? 0 : NVME_KERNEL_MAX_SEGS; }
  std::string kernel_transport() const override { return kernel_transport_; }
  int admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) override;
  // The first queue (and with iopoll the first poll queue) also sends one read of LBA 0, so
  // that a kernel without passthrough on io_uring, or a device without poll queues for
  // iopoll, is reported here in one line.
  Status create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) override;

  const UringPassthruConfig& config() const { return cfg_; }
  int fd() const { return fd_; }

 private:
  explicit UringPassthru(const UringPassthruConfig& cfg) : cfg_(cfg) {}
  Status init();  // open()'s work; the destructor closes the device

  UringPassthruConfig cfg_;
  int fd_ = -1;
  uint32_t nsid_ = 0;
  std::string kernel_transport_ = "pcie";
  bool probed_polled_ = false;
};

}  // namespace biofs
