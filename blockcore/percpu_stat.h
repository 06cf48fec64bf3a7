// Counterpart of the kernel's per-CPU disk statistics (struct disk_stats, part_stat_inc,
// blk_account_io_done) and of blk-stat's latency buckets: I/O counts, bytes, errors and clones,
// and per-stage latency histograms, kept in one block per thread.
//
// "Per-CPU" is per-thread here, as for the bio cache: each thread writes only its own block
// with relaxed loads and stores (no locked instruction, no lock); a reader sums every block
// under a mutex taken only by readers and by threads starting or ending. A thread's block is
// folded into a retired total when the thread exits, so counts never go backwards.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "blk_types.h"

namespace biofs {

// The stamps along one I/O (stage_clock.h). Each histogram holds the time from the previous
// stamp on the same I/O to this one; `complete` is from the command's submission to the core
// seeing its completion, `request_total` from the upper layer's request to its reply.
enum Stage : unsigned {
  STAGE_BIO_ALLOC_HIT,   // bio allocated from the per-thread cache
  STAGE_BIO_ALLOC_MISS,  // bio allocated from the mempool (a miss, or no cache)
  STAGE_SPLIT,           // the full split walk (and the split, if one was made)
  STAGE_TAG,             // request and tag obtained (plug cache or sbitmap)
  STAGE_PLUG_FLUSH,      // the plug flushed: the time the request waited in the plug
  STAGE_SUBMIT,          // the driver handed the command to its submission ring
  STAGE_COMPLETE,        // submission -> completion seen (the device's share)
  STAGE_REPLY,           // last stamp on the submitting side -> reply sent
  STAGE_REQUEST_TOTAL,   // request received -> reply sent
  NR_STAGES
};
const char* stage_name(unsigned stage);

// Log-linear buckets: exact below 8 ns, then 8 per power of two (12.5% wide at most).
inline constexpr unsigned STAT_HIST_BUCKETS = 496;
unsigned stat_hist_bucket(uint64_t ns);
uint64_t stat_hist_lower(unsigned bucket);  // the smallest value in the bucket
uint64_t stat_hist_upper(unsigned bucket);  // the largest value in the bucket

struct StageHist {
  std::vector<uint64_t> buckets = std::vector<uint64_t>(STAT_HIST_BUCKETS, 0);
  uint64_t count() const;
  // The q-quantile (0..1) in ns: the midpoint of the bucket holding it; 0 when empty.
  uint64_t quantile(double q) const;
  StageHist& operator-=(const StageHist& o);  // for the difference of two snapshots
};

struct BlkStatSnapshot {
  uint64_t ios[3] = {};    // completed requests: read, write, other (flush, discard, ...)
  uint64_t bytes[3] = {};  // their bytes
  uint64_t errors = 0;     // requests completed with an error status
  uint64_t clones = 0;     // bio_alloc_clone calls (splits and stacking targets)
  uint64_t flushes = 0;    // flushes submitted to a device with a volatile write cache
  uint64_t fua_writes = 0; // writes submitted with REQ_FUA to such a device
  std::array<StageHist, NR_STAGES> stages;
};
// The whole process's counts: every live thread's block plus the retired total.
BlkStatSnapshot blk_stat_snapshot();
// Threads holding a live block (those that counted something and have not exited).
size_t blk_stat_live_threads();

// The calling thread's block (hot paths).
void blk_stat_account_done(req_op op, uint32_t bytes, bool error);
void blk_stat_count_clone();
// Counted where blk-flush sees them (a slow path: ordinary I/O never gets there): flushes
// sent to a device with a volatile cache, and writes sent with REQ_FUA.
void blk_stat_count_flush();
void blk_stat_count_fua();
void blk_stat_record(Stage stage, uint64_t ns);

}  // namespace biofs
