// Power-cut emulation for the emulated namespace (`emu:PATH,vwc,powercut=N[,tear][,keep=F]`).
// No kernel twin: this is what a drive with a volatile write cache does when its power goes,
// as dm-log-writes replays and the xfstests "godown"/dm-flakey tests imitate on Linux.
//
// While enabled, every command of the namespace runs synchronously, in submission order, under
// one lock (the fast io_uring path of emu_queue.cc is left untouched when it is off). With
// `vwc`, each write that is not yet durable — no Flush since, no FUA — is remembered with the
// data it replaced. At the Nth state-changing command (write, write zeroes, deallocate,
// flush; reads do not count) the power goes:
//   - every remembered write is undone, newest first, so the file holds what was durable
//     at the last Flush plus the FUA writes; then, with keep=F, each undone write comes back
//     with probability F (seeded), in order — a cache may have written back some of them;
//   - with `tear`, a prefix of the cut command's blocks lands (a seeded 0..nlb-1 of them);
//   - that command and every later one fail with "Commands Aborted due to Power Loss".
// Without `vwc` writes are durable on completion, so nothing is undone; the cut still tears
// and fails what follows. The backing file afterwards is exactly the surviving image.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "nvme_cmd.h"

namespace biofs {

struct PowerCutConfig {
  bool enabled = false;
  uint64_t cut_after = 0;  // the Nth state-changing command cuts the power; 0: count only
  bool tear = false;
  double keep = 0;         // fraction of non-durable writes that survive anyway
  uint64_t seed = 1;
};

class EmuPowerCut {
 public:
  EmuPowerCut(const PowerCutConfig& cfg, int fd, unsigned lba_shift, uint64_t nlba, bool vwc);

  // Runs one I/O command on the backing file; returns its NVMe status.
  uint16_t execute(NvmeIod* iod);

  uint64_t commands() const { return commands_.load(std::memory_order_relaxed); }  // state-changing so far
  bool cut() const { return cut_.load(std::memory_order_acquire); }
  size_t pending() const;  // writes not yet durable
  // Cuts the power now (between commands: nothing is torn).
  void cut_now();

 private:
  struct Pending {
    uint64_t off;
    std::string old_data, new_data;
    bool durable;  // FUA
  };
  uint16_t do_write(uint64_t off, const std::string& data, bool fua);
  void power_off(const std::string* torn, uint64_t torn_off);  // lock held
  uint64_t next_random();

  PowerCutConfig cfg_;
  const int fd_;
  const unsigned lba_shift_;
  const uint64_t nlba_;
  const bool vwc_;
  mutable std::mutex lock_;
  std::vector<Pending> pending_;
  uint64_t rng_;
  std::atomic<uint64_t> commands_{0};
  std::atomic<bool> cut_{false};
};

}  // namespace biofs
