// NVMe status (SCT/SC) to block status, as the kernel's nvme_error_status(), and the names.
#include <doctest/doctest.h>

#include <cerrno>
#include <string>

#include "nvme/nvme_status.h"

using namespace biofs;

TEST_CASE("nvme_error_status maps each status class as the kernel does") {
  CHECK(nvme_error_status(NVME_SC_SUCCESS) == BLK_STS_OK);
  CHECK(nvme_error_status(NVME_SC_CAP_EXCEEDED) == BLK_STS_NOSPC);
  CHECK(nvme_error_status(NVME_SC_LBA_RANGE) == BLK_STS_TARGET);
  CHECK(nvme_error_status(NVME_SC_NS_NOT_READY) == BLK_STS_TARGET);
  CHECK(nvme_error_status(NVME_SC_CMD_INTERRUPTED) == BLK_STS_TARGET);
  CHECK(nvme_error_status(NVME_SC_INVALID_OPCODE) == BLK_STS_NOTSUPP);
  CHECK(nvme_error_status(NVME_SC_INVALID_FIELD) == BLK_STS_NOTSUPP);
  CHECK(nvme_error_status(NVME_SC_INVALID_NS) == BLK_STS_NOTSUPP);
  CHECK(nvme_error_status(NVME_SC_ONCS_NOT_SUPPORTED) == BLK_STS_NOTSUPP);
  CHECK(nvme_error_status(NVME_SC_CONFLICTING_ATTRS) == BLK_STS_NOTSUPP);
  CHECK(nvme_error_status(NVME_SC_WRITE_FAULT) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_READ_ERROR) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_UNWRITTEN_BLOCK) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_READ_ONLY) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_COMPARE_FAILED) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_ACCESS_DENIED) == BLK_STS_MEDIUM);
  CHECK(nvme_error_status(NVME_SC_HOST_PATH_ERROR) == BLK_STS_TRANSPORT);
  CHECK(nvme_error_status(NVME_SC_INTERNAL) == BLK_STS_IOERR);
  CHECK(nvme_error_status(NVME_SC_DATA_XFER_ERROR) == BLK_STS_IOERR);
  CHECK(nvme_error_status(NVME_SC_GUARD_CHECK) == BLK_STS_IOERR);  // no BLK_STS_PROTECTION here
  CHECK(nvme_error_status(0x7FF) == BLK_STS_IOERR);
}

TEST_CASE("DNR, More and CRD do not change the mapping") {
  const uint16_t extra = NVME_STATUS_DNR | NVME_STATUS_MORE | NVME_STATUS_CRD;
  CHECK(nvme_error_status(NVME_SC_LBA_RANGE | extra) == BLK_STS_TARGET);
  CHECK(nvme_error_status(NVME_SC_SUCCESS | NVME_STATUS_MORE) == BLK_STS_OK);
  CHECK(std::string(nvme_get_error_status_str(NVME_SC_LBA_RANGE | NVME_STATUS_DNR)) == "LBA Out of Range");
}

TEST_CASE("status names and the one-line description") {
  CHECK(std::string(nvme_get_error_status_str(NVME_SC_SUCCESS)) == "Success");
  CHECK(std::string(nvme_get_error_status_str(NVME_SC_INVALID_FIELD)) == "Invalid Field in Command");
  CHECK(std::string(nvme_get_error_status_str(NVME_SC_READ_ERROR)) == "Unrecovered Read Error");
  CHECK(std::string(nvme_get_error_status_str(NVME_SC_SGL_INVALID_DATA)) == "Data SGL Length Invalid");
  CHECK(std::string(nvme_get_error_status_str(0x1FE)) == "Unknown");
  CHECK(nvme_status_describe(NVME_SC_LBA_RANGE | NVME_STATUS_DNR) == "LBA Out of Range (sct 0x0 / sc 0x80) DNR");
  CHECK(nvme_status_describe(NVME_SC_WRITE_FAULT) == "Write Fault (sct 0x2 / sc 0x80)");
  CHECK(nvme_status_sct(NVME_SC_ONCS_NOT_SUPPORTED) == 1);
  CHECK(nvme_status_sc(NVME_SC_ONCS_NOT_SUPPORTED) == 0x83);
}

TEST_CASE("host errors become the status an emulated controller reports") {
  CHECK(nvme_status_from_errno(0, nvme_cmd_read) == NVME_SC_SUCCESS);
  CHECK(nvme_status_from_errno(-EIO, nvme_cmd_read) == NVME_SC_READ_ERROR);
  CHECK(nvme_status_from_errno(-EIO, nvme_cmd_write) == NVME_SC_WRITE_FAULT);
  CHECK(nvme_status_from_errno(-EIO, nvme_cmd_flush) == (NVME_SC_INTERNAL | NVME_STATUS_DNR));
  CHECK((nvme_status_from_errno(-ENOSPC, nvme_cmd_write) & NVME_SCT_SC_MASK) == NVME_SC_CAP_EXCEEDED);
  CHECK(nvme_error_status(nvme_status_from_errno(-ENOSPC, nvme_cmd_write)) == BLK_STS_NOSPC);
  CHECK((nvme_status_from_errno(-EOPNOTSUPP, nvme_cmd_dsm) & NVME_SCT_SC_MASK) == NVME_SC_INVALID_FIELD);
}

TEST_CASE("host errors: the driver may retry what a retry can change (no DNR), never what it cannot (DNR)") {
  // nvme_decide_disposition() reads DNR: a passthrough -EINTR/-EAGAIN or an I/O error is sent
  // again, an invalid or read-only or full answer is not.
  for (const int e : {-EINTR, -EAGAIN, -ECANCELED, -EIO}) {
    CAPTURE(e);
    CHECK((nvme_status_from_errno(e, nvme_cmd_read) & NVME_STATUS_DNR) == 0);
  }
  CHECK(nvme_status_from_errno(-EAGAIN, nvme_cmd_read) == NVME_SC_ABORT_REQ);
  for (const int e : {-EINVAL, -EOPNOTSUPP, -ENOSPC, -EDQUOT, -EROFS, -EACCES}) {
    CAPTURE(e);
    CHECK((nvme_status_from_errno(e, nvme_cmd_write) & NVME_STATUS_DNR) != 0);
  }
}
