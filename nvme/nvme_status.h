// Counterpart of nvme_error_status() (drivers/nvme/host/core.c) and nvme_get_error_status_str()
// (drivers/nvme/host/constants.c): an NVMe completion status turned into the block layer's
// status, and a readable name for logs.
#pragma once

#include <cstdint>
#include <string>

#include "blockcore/blk_types.h"
#include "nvme_spec.h"

namespace biofs {

// `status` is the 15-bit status field (cqe.status >> 1, the kernel's nvme_req(req)->status).
// CRD, More and DNR are ignored. Errors the block layer has no code for (end-to-end
// protection, reservation conflicts) become BLK_STS_IOERR.
blk_status_t nvme_error_status(uint16_t status);

// "LBA Out of Range", "Invalid Field in Command", ...; "Unknown" for codes without a name.
const char* nvme_get_error_status_str(uint16_t status);

// One log line's worth: "LBA Out of Range (sct 0x0 / sc 0x80) DNR".
std::string nvme_status_describe(uint16_t status);

// The status an emulated controller reports for a failed host system call (-errno), per
// operation: reads fail as Unrecovered Read Error, writes as Write Fault, the rest as
// Internal Error; no space is Capacity Exceeded. Answers a retry cannot change (no space,
// invalid, read-only) carry DNR; interrupted or "try again" ones are Command Abort Requested,
// without DNR, as is an I/O error, so that the driver retries them (nvme_decide_disposition);
// a failed flush carries DNR (what it lost does not come back by asking again).
uint16_t nvme_status_from_errno(int neg_errno, uint8_t opcode);

}  // namespace biofs
