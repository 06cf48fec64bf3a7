// Counterpart of nvme_error_status() (drivers/nvme/host/core.c) and the status strings of
// drivers/nvme/host/constants.c.
#include "nvme_status.h"

#include <cerrno>
#include <cstdio>

namespace biofs {

blk_status_t nvme_error_status(uint16_t status) {
  switch (status & NVME_SCT_SC_MASK) {
    case NVME_SC_SUCCESS:
      return BLK_STS_OK;
    case NVME_SC_CAP_EXCEEDED:
      return BLK_STS_NOSPC;
    case NVME_SC_LBA_RANGE:
    case NVME_SC_CMD_INTERRUPTED:
    case NVME_SC_NS_NOT_READY:
      return BLK_STS_TARGET;
    case NVME_SC_CONFLICTING_ATTRS:
    case NVME_SC_ONCS_NOT_SUPPORTED:
    case NVME_SC_INVALID_OPCODE:
    case NVME_SC_INVALID_FIELD:
    case NVME_SC_INVALID_NS:
      return BLK_STS_NOTSUPP;
    case NVME_SC_WRITE_FAULT:
    case NVME_SC_READ_ERROR:
    case NVME_SC_UNWRITTEN_BLOCK:
    case NVME_SC_ACCESS_DENIED:
    case NVME_SC_READ_ONLY:
    case NVME_SC_COMPARE_FAILED:
      return BLK_STS_MEDIUM;
    case NVME_SC_HOST_PATH_ERROR:
      return BLK_STS_TRANSPORT;
    default:  // the kernel's BLK_STS_PROTECTION and BLK_STS_RESV_CONFLICT land here too
      return BLK_STS_IOERR;
  }
}

const char* nvme_get_error_status_str(uint16_t status) {
  switch (status & NVME_SCT_SC_MASK) {
    case NVME_SC_SUCCESS: return "Success";
    case NVME_SC_INVALID_OPCODE: return "Invalid Command Opcode";
    case NVME_SC_INVALID_FIELD: return "Invalid Field in Command";
    case NVME_SC_CMDID_CONFLICT: return "Command ID Conflict";
    case NVME_SC_DATA_XFER_ERROR: return "Data Transfer Error";
    case NVME_SC_POWER_LOSS: return "Commands Aborted due to Power Loss Notification";
    case NVME_SC_INTERNAL: return "Internal Error";
    case NVME_SC_ABORT_REQ: return "Command Abort Requested";
    case NVME_SC_ABORT_QUEUE: return "Command Aborted due to SQ Deletion";
    case NVME_SC_FUSED_FAIL: return "Command Aborted due to Failed Fused Command";
    case NVME_SC_FUSED_MISSING: return "Command Aborted due to Missing Fused Command";
    case NVME_SC_INVALID_NS: return "Invalid Namespace or Format";
    case NVME_SC_CMD_SEQ_ERROR: return "Command Sequence Error";
    case NVME_SC_SGL_INVALID_LAST: return "Invalid SGL Segment Descriptor";
    case NVME_SC_SGL_INVALID_COUNT: return "Invalid Number of SGL Descriptors";
    case NVME_SC_SGL_INVALID_DATA: return "Data SGL Length Invalid";
    case NVME_SC_SGL_INVALID_METADATA: return "Metadata SGL Length Invalid";
    case NVME_SC_SGL_INVALID_TYPE: return "SGL Descriptor Type Invalid";
    case NVME_SC_PRP_INVALID_OFFSET: return "PRP Offset Invalid";
    case NVME_SC_NS_WRITE_PROTECTED: return "Namespace is Write Protected";
    case NVME_SC_CMD_INTERRUPTED: return "Command Interrupted";
    case NVME_SC_TRANSIENT_TR_ERR: return "Transient Transport Error";
    case NVME_SC_LBA_RANGE: return "LBA Out of Range";
    case NVME_SC_CAP_EXCEEDED: return "Capacity Exceeded";
    case NVME_SC_NS_NOT_READY: return "Namespace Not Ready";
    case NVME_SC_RESERVATION_CONFLICT: return "Reservation Conflict";
    case NVME_SC_CONFLICTING_ATTRS: return "Conflicting Attributes";
    case NVME_SC_INVALID_PI: return "Invalid Protection Information";
    case NVME_SC_READ_ONLY: return "Attempted Write to Read Only Range";
    case NVME_SC_ONCS_NOT_SUPPORTED: return "ONCS Not Supported";
    case NVME_SC_WRITE_FAULT: return "Write Fault";
    case NVME_SC_READ_ERROR: return "Unrecovered Read Error";
    case NVME_SC_GUARD_CHECK: return "End-to-end Guard Check Error";
    case NVME_SC_APPTAG_CHECK: return "End-to-end Application Tag Check Error";
    case NVME_SC_REFTAG_CHECK: return "End-to-end Reference Tag Check Error";
    case NVME_SC_COMPARE_FAILED: return "Compare Failure";
    case NVME_SC_ACCESS_DENIED: return "Access Denied";
    case NVME_SC_UNWRITTEN_BLOCK: return "Deallocated or Unwritten Logical Block";
    case NVME_SC_INTERNAL_PATH_ERROR: return "Internal Pathing Error";
    case NVME_SC_ANA_PERSISTENT_LOSS: return "Asymmetric Access Persistent Loss";
    case NVME_SC_ANA_INACCESSIBLE: return "Asymmetric Access Inaccessible";
    case NVME_SC_ANA_TRANSITION: return "Asymmetric Access Transition";
    case NVME_SC_CTRL_PATH_ERROR: return "Controller Pathing Error";
    case NVME_SC_HOST_PATH_ERROR: return "Host Pathing Error";
    case NVME_SC_HOST_ABORTED_CMD: return "Host Aborted Command";
    default: return "Unknown";
  }
}

std::string nvme_status_describe(uint16_t status) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s (sct 0x%x / sc 0x%x)%s", nvme_get_error_status_str(status),
                nvme_status_sct(status), nvme_status_sc(status), (status & NVME_STATUS_DNR) ? " DNR" : "");
  return buf;
}

uint16_t nvme_status_from_errno(int neg_errno, uint8_t opcode) {
  switch (neg_errno) {
    case 0: return NVME_SC_SUCCESS;
    case -ENOSPC:
    case -EDQUOT: return NVME_SC_CAP_EXCEEDED | NVME_STATUS_DNR;
    case -EOPNOTSUPP:
    case -EINVAL: return NVME_SC_INVALID_FIELD | NVME_STATUS_DNR;
    case -EROFS:
    case -EPERM:
    case -EACCES: return NVME_SC_READ_ONLY | NVME_STATUS_DNR;
    case -EINTR:
    case -EAGAIN:
    case -ECANCELED: return NVME_SC_ABORT_REQ;
    default: break;
  }
  switch (opcode) {
    case nvme_cmd_read: return NVME_SC_READ_ERROR;
    case nvme_cmd_write:
    case nvme_cmd_write_zeroes: return NVME_SC_WRITE_FAULT;
    // A flush that failed lost data the cache held; the host answers the next fdatasync with
    // success (errseq), so a retry would report the loss as gone: Do Not Retry.
    case nvme_cmd_flush: return NVME_SC_INTERNAL | NVME_STATUS_DNR;
    default: return NVME_SC_INTERNAL;
  }
}

}  // namespace biofs
