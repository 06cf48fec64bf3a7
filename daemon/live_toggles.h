// Toggles that change on a mounted filesystem, as a queue's sysfs attributes change under I/O:
// `setfattr -n user.biofs.set -v NAME=VALUE MNT` as root (tools/biofs-ctl wraps it). The block
// toggles (bio_cache, tag_batch, split_check) and the reactor's fuse_uring_plug and
// fuse_uring_hot take effect for the next bio or request: each is one atomic the I/O path reads
// with a relaxed load, and no I/O in flight is lost or done twice (a bio allocated under the old
// mode ends under it). Anything else that is a mount option is refused with EOPNOTSUPP and one
// line saying it is set at mount; an unknown name or value with EINVAL and the parser's line.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace biofs {

class BioSet;
class Device;
struct FuseContext;

inline constexpr const char* SET_XATTR = "user.biofs.set";

class LiveToggles {
 public:
  // bio_cache switches the cache of `fs_bios` (the filesystem's bio set) and of a stripe's clones.
  LiveToggles(Device* dev, BioSet* fs_bios, FuseContext* ctx);

  // The names set() takes, in the order the stats list them.
  static const std::vector<std::string>& names();

  // Applies "NAME=VALUE". 0, or -EINVAL / -EOPNOTSUPP with one line in *why (also kept for the
  // stats as the last refusal).
  int set(std::string_view assignment, std::string* why);

  // {"NAME": {"value": "...", "changes": N}, ..., "last_refusal": "..."} for the stats.
  nlohmann::ordered_json stats() const;

 private:
  std::string value_of(const std::string& name) const;

  Device* dev_;
  std::vector<BioSet*> bio_sets_;
  FuseContext* ctx_;
  mutable std::mutex mu_;  // one change at a time; never taken by the I/O path
  std::vector<uint64_t> changes_;
  std::string last_refusal_;
};

}  // namespace biofs
