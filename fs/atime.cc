#include "atime.h"

#include <sys/stat.h>

namespace biofs {

namespace {

// timespec64_compare(a, b) >= 0
bool not_before(int64_t a_sec, uint32_t a_nsec, int64_t b_sec, uint32_t b_nsec) {
  return a_sec > b_sec || (a_sec == b_sec && a_nsec >= b_nsec);
}

// relatime_need_update(): an atime not newer than the last change, or a day old, moves.
bool relatime_need_update(const disk::Inode& d, const struct timespec& now) {
  if (not_before(d.mtime_sec, d.mtime_nsec, d.atime_sec, d.atime_nsec)) return true;
  if (not_before(d.ctime_sec, d.ctime_nsec, d.atime_sec, d.atime_nsec)) return true;
  return now.tv_sec - d.atime_sec >= 24 * 60 * 60;
}

}  // namespace

bool atime_needs_update(const disk::Inode& d, const AtimePolicy& policy, const struct timespec& now) {
  if (policy.mode == AtimeMode::noatime || (d.flags & disk::INODE_NOATIME)) return false;  // or chattr +A
  if (policy.nodiratime && S_ISDIR(d.mode)) return false;
  if (policy.mode == AtimeMode::relatime && !relatime_need_update(d, now)) return false;
  return !(d.atime_sec == now.tv_sec && d.atime_nsec == uint32_t(now.tv_nsec));
}

}  // namespace biofs
