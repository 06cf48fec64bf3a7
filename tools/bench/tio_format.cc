#include "tio_format.h"

#include <cinttypes>
#include <cstdio>

namespace biofs::bench {

std::string tio_iops(uint64_t iops) {
  char buf[48];
  if (iops > 1000000)
    std::snprintf(buf, sizeof(buf), "%.2fM", double(iops) / 1000000.0);
  else if (iops > 100000)
    std::snprintf(buf, sizeof(buf), "%.2fK", double(iops) / 1000.0);
  else
    std::snprintf(buf, sizeof(buf), "%" PRIu64, iops);
  return buf;
}

std::string tio_bw(uint64_t iops, uint64_t bs) {
  const uint64_t mib = 1048576;
  uint64_t bw = 0;
  if (bs > mib)
    bw = iops * (bs / mib);
  else if (bs)
    bw = iops / (mib / bs);
  char buf[48];
  if (bw > 2000)
    std::snprintf(buf, sizeof(buf), "%.2fGiB/s", double(bw) / 1000.0);
  else
    std::snprintf(buf, sizeof(buf), "%" PRIu64 "MiB/s", bw);
  return buf;
}

std::string tio_ios_per_call(uint64_t submitted, uint64_t reaped, uint64_t calls) {
  if (!calls) return "-1/-1";
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%" PRIu64 "/%" PRIu64, submitted / calls, reaped / calls);
  return buf;
}

std::string tio_interval_line(uint64_t iops, uint64_t bs, bool nop, uint64_t submitted, uint64_t reaped,
                              uint64_t calls) {
  std::string line = "IOPS=" + tio_iops(iops) + ", ";
  if (!nop) line += "BW=" + tio_bw(iops, bs) + ", ";
  return line + "IOS/call=" + tio_ios_per_call(submitted, reaped, calls);
}

std::string tio_max_line(uint64_t max_iops) { return "Maximum IOPS=" + tio_iops(max_iops); }

}  // namespace biofs::bench
