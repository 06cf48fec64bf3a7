// Power-cut emulation (emu_powercut.h): the volatile write cache as a list of undoable writes.
#include "emu_powercut.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include "bounce.h"
#include "nvme_status.h"

namespace biofs {

namespace {

bool pread_all(int fd, void* buf, size_t len, uint64_t off) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    const ssize_t n = pread(fd, p, len, off_t(off));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    p += n, len -= size_t(n), off += uint64_t(n);
  }
  return true;
}

bool pwrite_all(int fd, const void* buf, size_t len, uint64_t off) {
  auto* p = static_cast<const uint8_t*>(buf);
  while (len) {
    const ssize_t n = pwrite(fd, p, len, off_t(off));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    p += n, len -= size_t(n), off += uint64_t(n);
  }
  return true;
}

constexpr uint16_t kPowerLost = NVME_SC_POWER_LOSS | NVME_STATUS_DNR;

}  // namespace

EmuPowerCut::EmuPowerCut(const PowerCutConfig& cfg, int fd, unsigned lba_shift, uint64_t nlba, bool vwc)
    : cfg_(cfg), fd_(fd), lba_shift_(lba_shift), nlba_(nlba), vwc_(vwc), rng_(cfg.seed * 0x9E3779B97F4A7C15ull + 1) {}

uint64_t EmuPowerCut::next_random() {  // splitmix64
  uint64_t x = (rng_ += 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

size_t EmuPowerCut::pending() const {
  std::lock_guard g(lock_);
  return pending_.size();
}

void EmuPowerCut::cut_now() {
  std::lock_guard g(lock_);
  if (!cut_.load(std::memory_order_relaxed)) power_off(nullptr, 0);
}

// The power goes: undo what was not durable, bring back what the cache happened to write, tear.
void EmuPowerCut::power_off(const std::string* torn, uint64_t torn_off) {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it)
    pwrite_all(fd_, it->old_data.data(), it->old_data.size(), it->off);
  const uint64_t keep_t = cfg_.keep >= 1 ? UINT64_MAX : uint64_t(std::ldexp(cfg_.keep, 64));
  for (const Pending& p : pending_) {
    const bool keep = p.durable || (keep_t && (keep_t == UINT64_MAX || next_random() < keep_t));
    if (keep) pwrite_all(fd_, p.new_data.data(), p.new_data.size(), p.off);
  }
  pending_.clear();
  if (torn && cfg_.tear) {
    const uint64_t blocks = torn->size() >> lba_shift_;
    const uint64_t lands = blocks ? next_random() % blocks : 0;  // 0..nlb-1 blocks
    if (lands) pwrite_all(fd_, torn->data(), size_t(lands << lba_shift_), torn_off);
  }
  cut_.store(true, std::memory_order_release);
}

uint16_t EmuPowerCut::do_write(uint64_t off, const std::string& data, bool fua) {
  if (vwc_) {
    Pending p{off, std::string(data.size(), '\0'), data, fua};
    if (!pread_all(fd_, p.old_data.data(), p.old_data.size(), off)) return NVME_SC_INTERNAL;
    pending_.push_back(std::move(p));
  }
  return pwrite_all(fd_, data.data(), data.size(), off) ? uint16_t(NVME_SC_SUCCESS) : uint16_t(NVME_SC_WRITE_FAULT);
}

uint16_t EmuPowerCut::execute(NvmeIod* iod) {
  const NvmeCommand& c = iod->cmd;
  std::lock_guard g(lock_);
  if (cut_.load(std::memory_order_relaxed)) return kPowerLost;
  const uint8_t op = c.opcode;
  const bool rw = op == nvme_cmd_read || op == nvme_cmd_write || op == nvme_cmd_write_zeroes;
  const uint64_t slba = rw ? nvme_cmd_slba(c) : 0;
  const uint32_t nlb = rw ? nvme_cmd_nlb(c) : 0;
  if (rw && !(nlb <= nlba_ && slba <= nlba_ - nlb)) return NVME_SC_LBA_RANGE | NVME_STATUS_DNR;
  const uint64_t off = slba << lba_shift_, bytes = uint64_t(nlb) << lba_shift_;
  if ((op == nvme_cmd_read || op == nvme_cmd_write) && (iod->data_len != bytes || !iod->nr_vecs))
    return NVME_SC_SGL_INVALID_DATA | NVME_STATUS_DNR;

  if (op == nvme_cmd_read) {
    std::string buf(bytes, '\0');
    if (!pread_all(fd_, buf.data(), buf.size(), off)) return NVME_SC_READ_ERROR;
    copy_to_iovecs(iod->vecs, iod->nr_vecs, reinterpret_cast<const uint8_t*>(buf.data()));
    return NVME_SC_SUCCESS;
  }

  // State-changing commands: gather what each would write, then count it.
  std::vector<std::pair<uint64_t, std::string>> writes;
  bool fua = false;
  switch (op) {
    case nvme_cmd_write: {
      std::string data(bytes, '\0');
      copy_from_iovecs(reinterpret_cast<uint8_t*>(data.data()), iod->vecs, iod->nr_vecs);
      writes.emplace_back(off, std::move(data));
      fua = c.cdw12 & NVME_RW_FUA;
      break;
    }
    case nvme_cmd_write_zeroes:
      writes.emplace_back(off, std::string(bytes, '\0'));
      fua = c.cdw12 & NVME_RW_FUA;
      break;
    case nvme_cmd_dsm: {
      const unsigned nr = (c.cdw10 & 0xFF) + 1;
      NvmeDsmRange ranges[NVME_DSM_MAX_RANGES];
      if (iod->data_len != nr * sizeof(NvmeDsmRange)) return NVME_SC_SGL_INVALID_DATA | NVME_STATUS_DNR;
      copy_from_iovecs(reinterpret_cast<uint8_t*>(ranges), iod->vecs, iod->nr_vecs);
      for (unsigned i = 0; i < nr; i++)
        if (!(ranges[i].nlb <= nlba_ && ranges[i].slba <= nlba_ - ranges[i].nlb))
          return NVME_SC_LBA_RANGE | NVME_STATUS_DNR;
      if (c.cdw11 & NVME_DSMGMT_AD)  // deallocated blocks read as zeroes (DLFEAT)
        for (unsigned i = 0; i < nr; i++)
          if (ranges[i].nlb)
            writes.emplace_back(ranges[i].slba << lba_shift_, std::string(uint64_t(ranges[i].nlb) << lba_shift_, '\0'));
      break;
    }
    case nvme_cmd_flush:
      break;
    default:
      return NVME_SC_INVALID_OPCODE | NVME_STATUS_DNR;
  }
  const uint64_t n = commands_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n == cfg_.cut_after) {
    power_off(writes.size() == 1 ? &writes[0].second : nullptr, writes.empty() ? 0 : writes[0].first);
    return kPowerLost;
  }
  if (op == nvme_cmd_flush) {
    pending_.clear();  // everything written so far is durable now
    return NVME_SC_SUCCESS;
  }
  for (const auto& [woff, data] : writes)
    if (const uint16_t st = do_write(woff, data, fua)) return st;
  return NVME_SC_SUCCESS;
}

}  // namespace biofs
