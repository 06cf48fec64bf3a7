// The numbers biofs-bench prints as fio's t/io_uring prints them (fio t/io_uring.c, main() and
// do_finish()), so the two outputs can be read side by side:
//   IOPS: above 1e6 "%.2fM" of IOPS/1e6, above 1e5 "%.2fK" of IOPS/1e3, otherwise the integer;
//   BW:   whole MiB/s, IOPS / (1 MiB / bs) (integer divisions, IOPS * (bs / 1 MiB) above 1 MiB
//         blocks); above 2000 it switches to "%.2fGiB/s" of MiB/s / 1000 (t/io_uring's divisor);
//   IOS/call: submitted / calls and reaped / calls, integer divisions over the interval;
//         -1/-1 for an interval without a call.
// Pure functions, unit-tested against the captured t/io_uring lines (tests/tools/data/).
#pragma once

#include <cstdint>
#include <string>

namespace biofs::bench {

// "82528", "655.46K", "8.14M".
std::string tio_iops(uint64_t iops);
// MiB/s as t/io_uring computes it: "322MiB/s", "2.56GiB/s".
std::string tio_bw(uint64_t iops, uint64_t bs);
// "32/31"; "-1/-1" when calls is 0.
std::string tio_ios_per_call(uint64_t submitted, uint64_t reaped, uint64_t calls);
// One per-second line, without the newline: "IOPS=…, BW=…, IOS/call=s/c" (no BW with nop).
std::string tio_interval_line(uint64_t iops, uint64_t bs, bool nop, uint64_t submitted, uint64_t reaped,
                              uint64_t calls);
// "Maximum IOPS=…".
std::string tio_max_line(uint64_t max_iops);

// t/io_uring's batch rule: 0 means 1, more than the depth means the depth.
inline unsigned tio_clamp_batch(unsigned batch, unsigned depth) {
  if (!batch) batch = 1;
  return batch > depth ? depth : batch;
}

}  // namespace biofs::bench
