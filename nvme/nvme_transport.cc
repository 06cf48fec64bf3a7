// Counterpart of nvme_complete_rq()'s error half and nvme_log_error()
// (drivers/nvme/host/core.c).
#include "nvme_transport.h"

#include <atomic>
#include <cstdio>

namespace biofs {

namespace {
std::atomic<int> error_log_budget{32};
}

void nvme_set_error_log_limit(int n) { error_log_budget.store(n, std::memory_order_relaxed); }

void NvmeQueue::fail(NvmeIod* iod, uint16_t status, RqList* failed) {
  errors_++;
  Request* rq = nvme_iod_to_rq(iod);
  iod->status = status;  // nvme_req(req)->status, for nvme_decide_disposition()
  rq->status = nvme_error_status(status);
  failed->add_tail(rq);
}

// nvme_log_error(): called only for a command that ends with its error, not one that is retried.
void nvme_log_error(const std::string& queue, const NvmeIod* iod) {
  const int left = error_log_budget.fetch_sub(1, std::memory_order_relaxed);
  if (left > 0) {
    const NvmeCommand& c = iod->cmd;
    const bool has_lba = c.opcode == nvme_cmd_read || c.opcode == nvme_cmd_write ||
                         c.opcode == nvme_cmd_write_zeroes;
    std::fprintf(stderr, "%s: %s cid=%u nsid=%u", queue.c_str(), nvme_opcode_name(c.opcode), c.command_id, c.nsid);
    if (has_lba)
      std::fprintf(stderr, " slba=%llu nlb=%u", (unsigned long long)nvme_cmd_slba(c), nvme_cmd_nlb(c));
    if (iod->retries) std::fprintf(stderr, " after %u retries", unsigned(iod->retries));
    std::fprintf(stderr, ": %s\n", nvme_status_describe(iod->status).c_str());
  } else if (left == 0) {
    std::fprintf(stderr, "%s: further NVMe errors are not logged\n", queue.c_str());
  }
}

}  // namespace biofs
