// The passthrough transport's ring-entry steps on the host (issue 45): how a command's SQE is
// built, the registered (fixed) buffer's index and slot included, and how a CQE's res becomes
// the NVMe status, a negative res (-errno from the host) included. The same functions run in
// UringQueue (nvme/uring_passthru.cc); the round trips through a real kernel's /dev/ngXnY are in
// tests/qemu/passthrough_guest_test.cc, which only a QEMU guest runs.
#include <doctest/doctest.h>
#include <linux/nvme_ioctl.h>
#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "nvme/bounce.h"
#include "nvme/nvme_cmd.h"
#include "nvme/nvme_status.h"
#include "nvme/uring_passthru.h"

using namespace biofs;

namespace {
alignas(4096) uint8_t mem[4 * 4096];

struct Sqe128 {
  io_uring_sqe sqe[2];
};

// A data command of `len` bytes over two vecs (mem, then mem + 2 pages), CID = cid.
void make_iod(NvmeIod* iod, uint8_t opcode, uint16_t cid, uint32_t len) {
  std::memset(iod, 0, sizeof(*iod));
  iod->cmd.opcode = opcode;
  iod->cmd.command_id = cid;
  iod->cmd.nsid = 1;
  if (len) {
    iod->vecs[0] = {mem, len / 2};
    iod->vecs[1] = {mem + 2 * 4096, len - len / 2};
    iod->nr_vecs = 2;
  }
  iod->data_len = len;
}
nvme_uring_cmd* cmd_of(Sqe128& s) { return reinterpret_cast<nvme_uring_cmd*>(s.sqe[0].cmd); }
}  // namespace

TEST_CASE("uring passthrough CQE decode: res 0 and a positive NVMe status pass as they are, a negative res (-errno: the host failed the command) goes through nvme_status_from_errno") {
  BounceArena none;  // no fixed buffers
  NvmeIod iod;
  make_iod(&iod, nvme_cmd_read, 5, 4096);
  CHECK(uring_passthru_cqe_status(&iod, 0, none) == NVME_SC_SUCCESS);
  const uint16_t sf = NVME_SC_INVALID_FIELD | NVME_STATUS_DNR;  // the device's own answer
  CHECK(uring_passthru_cqe_status(&iod, int(sf), none) == sf);
  CHECK(uring_passthru_cqe_status(&iod, int(NVME_SC_READ_ERROR), none) == NVME_SC_READ_ERROR);
  // Negative: never success, never the low bits of -errno taken as a status field.
  for (const int e : {EINVAL, EIO, EAGAIN, EINTR, ENOSPC, ECANCELED, ENOMEM, EFAULT}) {
    CAPTURE(e);
    for (const uint8_t op : {uint8_t(nvme_cmd_read), uint8_t(nvme_cmd_write), uint8_t(nvme_cmd_flush)}) {
      CAPTURE(int(op));
      make_iod(&iod, op, 5, op == nvme_cmd_flush ? 0 : 4096);
      const uint16_t st = uring_passthru_cqe_status(&iod, -e, none);
      CHECK(st != NVME_SC_SUCCESS);
      CHECK(st == nvme_status_from_errno(-e, op));
      CHECK(st != uint16_t(-e));
    }
  }
  // What the driver does with them: -EINVAL cannot succeed on a retry (DNR), -EAGAIN and -EIO
  // may (no DNR), and -EIO says which direction failed.
  make_iod(&iod, nvme_cmd_read, 5, 4096);
  CHECK(uring_passthru_cqe_status(&iod, -EINVAL, none) == (NVME_SC_INVALID_FIELD | NVME_STATUS_DNR));
  CHECK(uring_passthru_cqe_status(&iod, -EAGAIN, none) == NVME_SC_ABORT_REQ);
  CHECK(uring_passthru_cqe_status(&iod, -EIO, none) == NVME_SC_READ_ERROR);
  make_iod(&iod, nvme_cmd_write, 5, 4096);
  CHECK(uring_passthru_cqe_status(&iod, -EIO, none) == NVME_SC_WRITE_FAULT);
  CHECK(uring_passthru_cqe_status(&iod, -ENOSPC, none) == (NVME_SC_CAP_EXCEEDED | NVME_STATUS_DNR));
}

TEST_CASE("uring passthrough fixed buffers: a read or write goes through registered buffer index 0, slot command_id, IORING_URING_CMD_FIXED, one segment") {
  BounceArena fixed;
  REQUIRE(fixed.init(4, 8192).ok());
  REQUIRE(fixed.ready());
  NvmeIod iod;
  Sqe128 s;
  for (uint8_t i = 0; i < 8; i++) std::memset(mem + i * 1024, 0x10 + i, 1024);
  // A write of 6 KiB over two vecs, CID 2: gathered into slot 2.
  make_iod(&iod, nvme_cmd_write, 2, 6144);
  std::memset(&s, 0xff, sizeof(s));
  CHECK(uring_passthru_prep_sqe(&s.sqe[0], &iod, 7, false, fixed, 4));
  CHECK(s.sqe[0].opcode == IORING_OP_URING_CMD);
  CHECK(s.sqe[0].fd == 7);
  CHECK((s.sqe[0].flags & IOSQE_FIXED_FILE) == 0);
  CHECK(s.sqe[0].uring_cmd_flags == IORING_URING_CMD_FIXED);
  CHECK(unsigned(s.sqe[0].buf_index) == 0u);  // the one region registered (io_uring_register_buffers, 1 iovec)
  CHECK(s.sqe[0].cmd_op == NVME_URING_CMD_IO);
  CHECK(cmd_of(s)->addr == reinterpret_cast<uintptr_t>(fixed.slot(2)));
  CHECK(cmd_of(s)->data_len == 6144);
  CHECK(cmd_of(s)->opcode == nvme_cmd_write);
  CHECK(reinterpret_cast<void*>(uintptr_t(s.sqe[0].user_data)) == &iod);
  CHECK(std::memcmp(fixed.slot(2), mem, 3072) == 0);
  CHECK(std::memcmp(fixed.slot(2) + 3072, mem + 2 * 4096, 3072) == 0);
  // Its completion copies nothing back.
  std::vector<uint8_t> before(mem, mem + sizeof(mem));
  CHECK(uring_passthru_cqe_status(&iod, 0, fixed) == NVME_SC_SUCCESS);
  CHECK(std::memcmp(mem, before.data(), sizeof(mem)) == 0);

  // A read, CID 3 (regfiles: fd is index 0): the device fills slot 3; a success scatters it
  // into the vecs, a failure (a negative res or an NVMe status) leaves them alone.
  make_iod(&iod, nvme_cmd_read, 3, 8192);
  std::memset(&s, 0xff, sizeof(s));
  CHECK(uring_passthru_prep_sqe(&s.sqe[0], &iod, 0, true, fixed, 4));
  CHECK(s.sqe[0].fd == 0);
  CHECK((s.sqe[0].flags & IOSQE_FIXED_FILE) != 0);
  CHECK(s.sqe[0].uring_cmd_flags == IORING_URING_CMD_FIXED);
  CHECK(unsigned(s.sqe[0].buf_index) == 0u);
  CHECK(cmd_of(s)->addr == reinterpret_cast<uintptr_t>(fixed.slot(3)));
  CHECK(cmd_of(s)->data_len == 8192);
  std::memset(fixed.slot(3), 0xA5, 8192);
  std::memset(fixed.slot(2), 0x5A, 8192);  // a neighbour's slot: never read for CID 3
  std::memset(mem, 0, sizeof(mem));
  CHECK(uring_passthru_cqe_status(&iod, -EIO, fixed) == NVME_SC_READ_ERROR);
  CHECK(mem[0] == 0);
  CHECK(uring_passthru_cqe_status(&iod, int(NVME_SC_READ_ERROR), fixed) == NVME_SC_READ_ERROR);
  CHECK(mem[0] == 0);
  CHECK(uring_passthru_cqe_status(&iod, 0, fixed) == NVME_SC_SUCCESS);
  for (size_t i = 0; i < 4096; i++) REQUIRE(mem[i] == 0xA5);
  for (size_t i = 0; i < 4096; i++) REQUIRE(mem[2 * 4096 + i] == 0xA5);
  CHECK(mem[4096] == 0);  // between the two vecs: untouched
}

TEST_CASE("uring passthrough fixed buffers: a command id at or past the depth, data larger than a slot, a flush or no arena go as user memory") {
  BounceArena fixed;
  REQUIRE(fixed.init(4, 4096).ok());
  NvmeIod iod;
  Sqe128 s;
  struct Case {
    uint8_t op;
    uint16_t cid;
    uint32_t len;
    bool arena;
  };
  for (const Case c : {Case{nvme_cmd_read, 4, 4096, true}, Case{nvme_cmd_write, 1, 8192, true},
                       Case{nvme_cmd_flush, 1, 0, true}, Case{nvme_cmd_read, 1, 4096, false}}) {
    CAPTURE(int(c.op));
    CAPTURE(c.cid);
    CAPTURE(c.len);
    BounceArena none;
    make_iod(&iod, c.op, c.cid, c.len);
    std::memset(&s, 0xff, sizeof(s));
    CHECK_FALSE(uring_passthru_prep_sqe(&s.sqe[0], &iod, 7, false, c.arena ? fixed : none, 4));
    CHECK(s.sqe[0].uring_cmd_flags == 0);
    CHECK(unsigned(s.sqe[0].buf_index) == 0u);
    if (c.len) {
      CHECK(s.sqe[0].cmd_op == NVME_URING_CMD_IO_VEC);  // the caller's two vecs
      CHECK(cmd_of(s)->addr == reinterpret_cast<uintptr_t>(iod.vecs));
      CHECK(cmd_of(s)->data_len == 2);
    }
  }
}
