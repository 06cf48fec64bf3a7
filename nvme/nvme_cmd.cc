// Counterpart of nvme_setup_cmd() and friends (drivers/nvme/host/core.c) and of the user side
// of nvme_uring_cmd_io() (drivers/nvme/host/ioctl.c).
#include "nvme_cmd.h"

#include "blockcore/blk_mq.h"
#include "blockcore/usdt.h"

#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>

#include <cstring>

namespace biofs {

// Collects the request's data as iovecs, merging virtually contiguous bvecs (the PRP walk
// would treat them as one run of memory too). False if more than NVME_MAX_SEGS are needed.
static bool nvme_map_data(Request* rq, NvmeIod* iod) {
  uint32_t n = 0, bytes = 0;
  bool ok = true;
  for (Bio* bio = rq->bio; bio && ok; bio = bio->bi_next) {
    bio_for_each_bvec(bio, [&](const BioVec& bv) {
      uint8_t* base = bvec_virt(bv);
      bytes += bv.bv_len;
      if (n && static_cast<uint8_t*>(iod->vecs[n - 1].iov_base) + iod->vecs[n - 1].iov_len == base) {
        iod->vecs[n - 1].iov_len += bv.bv_len;
      } else if (n < NVME_MAX_SEGS) {
        iod->vecs[n++] = iovec{base, bv.bv_len};
      } else {
        ok = false;
      }
    });
  }
  iod->nr_vecs = n;
  iod->data_len = bytes;
  return ok && bytes == blk_rq_bytes(rq);
}

static inline bool nvme_rq_block_aligned(const NvmeNsInfo& ns, const Request* rq) {
  const uint64_t mask = (uint64_t(1) << (ns.lba_shift - SECTOR_SHIFT)) - 1;
  return !(blk_rq_pos(rq) & mask) && !(blk_rq_bytes(rq) & ((1u << ns.lba_shift) - 1));
}

// nvme_setup_rw(), also used for Write Zeroes (which has the same SLBA/NLB layout).
static blk_status_t nvme_setup_rw(const NvmeNsInfo& ns, Request* rq, NvmeIod* iod, uint8_t op) {
  NvmeCommand& c = iod->cmd;
  const uint32_t nlb = blk_rq_bytes(rq) >> ns.lba_shift;
  if (!nlb || nlb > NVME_MAX_NLB || !nvme_rq_block_aligned(ns, rq)) [[unlikely]]
    return BLK_STS_IOERR;
  c.opcode = op;
  nvme_cmd_set_slba(c, nvme_sect_to_lba(ns, blk_rq_pos(rq)));
  uint32_t control = 0;
  if (rq->cmd_flags & REQ_FUA) control |= NVME_RW_FUA;
  if (rq->cmd_flags & REQ_FAILFAST) control |= NVME_RW_LR;
  c.cdw12 = control | (nlb - 1);
  return BLK_STS_OK;
}

// nvme_setup_discard(): one deallocate range, as a queue with max_discard_segments = 1 sends.
static blk_status_t nvme_setup_discard(const NvmeNsInfo& ns, Request* rq, NvmeIod* iod) {
  const uint64_t nlb = blk_rq_bytes(rq) >> ns.lba_shift;
  if (!nlb || nlb > UINT32_MAX || !nvme_rq_block_aligned(ns, rq)) [[unlikely]]
    return BLK_STS_IOERR;
  iod->dsm = NvmeDsmRange{0, uint32_t(nlb), nvme_sect_to_lba(ns, blk_rq_pos(rq))};
  NvmeCommand& c = iod->cmd;
  c.opcode = nvme_cmd_dsm;
  c.cdw10 = 0;  // one range, 0-based
  c.cdw11 = NVME_DSMGMT_AD;
  iod->vecs[0] = iovec{&iod->dsm, sizeof(NvmeDsmRange)};
  iod->nr_vecs = 1;
  iod->data_len = sizeof(NvmeDsmRange);
  return BLK_STS_OK;
}

[[gnu::always_inline]] static inline blk_status_t nvme_setup_cmd_fields(const NvmeNsInfo& ns, Request* rq, NvmeIod* iod) {
  NvmeCommand& c = iod->cmd;
  std::memset(&c, 0, sizeof(c));
  c.command_id = uint16_t(rq->tag);
  c.nsid = ns.nsid;
  iod->nr_vecs = 0;
  iod->data_len = 0;
  iod->retries = 0;  // nvme_clear_nvme_request(); a retry keeps its count (NvmeDriver::nvme_retry_req)
  switch (req_op_of(rq)) {
    case REQ_OP_READ:
    case REQ_OP_WRITE: {
      const bool write = req_op_of(rq) == REQ_OP_WRITE;
      if (blk_status_t st = nvme_setup_rw(ns, rq, iod, write ? nvme_cmd_write : nvme_cmd_read)) [[unlikely]]
        return st;
      if (!nvme_map_data(rq, iod)) [[unlikely]]
        return BLK_STS_IOERR;
      return BLK_STS_OK;
    }
    case REQ_OP_FLUSH:
      c.opcode = nvme_cmd_flush;
      return BLK_STS_OK;
    case REQ_OP_WRITE_ZEROES:
      return nvme_setup_rw(ns, rq, iod, nvme_cmd_write_zeroes);
    case REQ_OP_DISCARD:
      return nvme_setup_discard(ns, rq, iod);
    default:
      return BLK_STS_NOTSUPP;
  }
}

// The nvme:nvme_setup_cmd tracepoint's place (drivers/nvme/host/core.c, v6.18): a command made,
// as USDT `nvme:nvme_setup_cmd` (qid, cid, opcode, nsid, cdw10, cdw11, cdw12): the kernel's
// field order without its controller id, flags and metadata.
[[gnu::cold, gnu::noinline]] static void trace_nvme_setup_cmd(const Request* rq, const NvmeCommand& c) {
  BIOFS_PROBE(nvme, nvme_setup_cmd, rq->mq_hctx->queue_num, c.command_id, c.opcode, c.nsid, c.cdw10, c.cdw11, c.cdw12);
}

blk_status_t nvme_setup_cmd(const NvmeNsInfo& ns, Request* rq, NvmeIod* iod) {
  const blk_status_t st = nvme_setup_cmd_fields(ns, rq, iod);
  if (tracing_on()) [[unlikely]]
    trace_nvme_setup_cmd(rq, iod->cmd);
  return st;
}

NvmeCommand nvme_identify_cmd(uint8_t cns, uint32_t nsid) {
  NvmeCommand c{};
  c.opcode = nvme_admin_identify;
  c.nsid = nsid;
  c.cdw10 = cns;
  return c;
}

void nvme_uring_cmd_prep(const NvmeCommand& cmd, const iovec* vecs, uint32_t nr_vecs, nvme_uring_cmd* out,
                         uint32_t* cmd_op) {
  std::memset(out, 0, sizeof(*out));
  out->opcode = cmd.opcode;
  out->flags = cmd.flags;
  out->nsid = cmd.nsid;
  out->cdw2 = cmd.cdw2;
  out->cdw3 = cmd.cdw3;
  out->cdw10 = cmd.cdw10;
  out->cdw11 = cmd.cdw11;
  out->cdw12 = cmd.cdw12;
  out->cdw13 = cmd.cdw13;
  out->cdw14 = cmd.cdw14;
  out->cdw15 = cmd.cdw15;
  *cmd_op = NVME_URING_CMD_IO;
  if (nr_vecs == 1) {
    out->addr = reinterpret_cast<uintptr_t>(vecs[0].iov_base);
    out->data_len = uint32_t(vecs[0].iov_len);
  } else if (nr_vecs > 1) {
    out->addr = reinterpret_cast<uintptr_t>(vecs);
    out->data_len = nr_vecs;
    *cmd_op = NVME_URING_CMD_IO_VEC;
  }
}

const char* nvme_opcode_name(uint8_t opcode) {
  switch (opcode) {
    case nvme_cmd_flush: return "FLUSH";
    case nvme_cmd_write: return "WRITE";
    case nvme_cmd_read: return "READ";
    case nvme_cmd_write_zeroes: return "WRITE ZEROES";
    case nvme_cmd_dsm: return "DSM";
    default: return "UNKNOWN";
  }
}

}  // namespace biofs
