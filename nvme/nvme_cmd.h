// Counterpart of nvme_setup_cmd() and its helpers (nvme_setup_rw, nvme_setup_flush,
// nvme_setup_discard, nvme_setup_write_zeroes) in drivers/nvme/host/core.c, of struct nvme_iod
// (drivers/nvme/host/pci.c), and of the user side of drivers/nvme/host/ioctl.c (struct
// nvme_uring_cmd): a block request becomes one NVMe command whose command id is the request's
// tag, plus its data as an iovec list.
//
// The data pointer (DPTR) of the 64-byte command is left zero: the data travels beside the
// command as iovecs, the form both transports take. For uring passthrough the kernel turns
// them into PRPs; the emulated namespace reads and writes them directly.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "blockcore/request.h"
#include "nvme_spec.h"

struct nvme_uring_cmd;

namespace biofs {

// Most data segments one command carries (NvmeIod::vecs): the bound on every queue's
// max_segments, so that a request with merged bios (blockcore/blk_rq_merge.h) always fits.
inline constexpr unsigned NVME_MAX_SEGS = 128;
// The most segments the kernel's nvme-pci driver puts in one request (drivers/nvme/host/pci.c).
inline constexpr unsigned NVME_KERNEL_MAX_SEGS = 127;

// struct nvme_iod: the driver's per-request data (the tag set's cmd_size bytes after each
// Request). Built on the submitting thread, read by the transport and the completion path.
struct alignas(64) NvmeIod {
  NvmeCommand cmd;
  uint32_t nr_vecs;   // entries of vecs[] in use
  uint32_t data_len;  // bytes they hold
  // Transport bookkeeping (the emulated controller's; passthrough leaves it alone).
  uint16_t status;    // NVMe status to post when the last sub-operation completes
  uint16_t pending;   // sub-operations still in flight
  uint8_t xfer;       // how the data moves (transport specific)
  uint8_t redo;       // the host answered a sub-operation transiently: run the command again
  uint8_t retries;    // nvme_request.retries: times the driver sent it again (nvme_retry_req)
  uint8_t rsvd[5];
  NvmeDsmRange dsm;   // the range list of a discard (one range)
  iovec vecs[NVME_MAX_SEGS];
};
static_assert(sizeof(NvmeCommand) == 64 && offsetof(NvmeIod, nr_vecs) == 64);

inline NvmeIod* nvme_iod(Request* rq) { return static_cast<NvmeIod*>(blk_mq_rq_to_pdu(rq)); }
inline Request* nvme_iod_to_rq(NvmeIod* iod) { return reinterpret_cast<Request*>(iod) - 1; }

// The parts of struct nvme_ns_head that building a command needs.
struct NvmeNsInfo {
  uint32_t nsid = 1;
  unsigned lba_shift = 9;  // log2 of the logical block size
  uint64_t nsze = 0;       // namespace size in logical blocks
};
inline uint64_t nvme_sect_to_lba(const NvmeNsInfo& ns, sector_t sector) {
  return sector >> (ns.lba_shift - SECTOR_SHIFT);
}
inline sector_t nvme_lba_to_sect(const NvmeNsInfo& ns, uint64_t lba) {
  return lba << (ns.lba_shift - SECTOR_SHIFT);
}

// nvme_setup_cmd(): fills iod->cmd and the data vecs from rq. CID = rq->tag. The data vecs
// cover every bio of the request (rq->bio .. rq->biotail, as a plug merge chained them) in
// order, memory-contiguous vecs joined: one command per request, however many bios it holds. Read and Write
// carry SLBA and a 0-based NLB in the namespace's block size, FUA and limited retry from the
// request flags; Flush carries the namespace only; Write Zeroes carries SLBA/NLB and no data;
// a discard becomes Dataset Management with the deallocate attribute and one range in
// iod->dsm. Returns BLK_STS_IOERR for a request the command cannot express (not block
// aligned, too many blocks or segments, no data), BLK_STS_NOTSUPP for an unknown op.
blk_status_t nvme_setup_cmd(const NvmeNsInfo& ns, Request* rq, NvmeIod* iod);

// Identify with `cns` for namespace `nsid` (0 for the controller).
NvmeCommand nvme_identify_cmd(uint8_t cns, uint32_t nsid);

// struct nvme_uring_cmd for IORING_OP_URING_CMD from the command and its data vecs: one vec
// goes as addr/data_len with NVME_URING_CMD_IO, several as the iovec array and its length
// with NVME_URING_CMD_IO_VEC (returned in *cmd_op). Metadata is not used.
void nvme_uring_cmd_prep(const NvmeCommand& cmd, const iovec* vecs, uint32_t nr_vecs, nvme_uring_cmd* out,
                         uint32_t* cmd_op);

// "READ slba=... nlb=..." for logs.
const char* nvme_opcode_name(uint8_t opcode);

}  // namespace biofs
