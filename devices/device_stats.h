// What an opened device reports for the mount's stats (daemon/stats.h, tools/biofs-stat):
// Device::stats() fills it.
#pragma once

#include <cstdint>
#include <string>

#include "nvme/emu_write_cache.h"

namespace biofs {

// What the device reports, where it has something to say (an emulated namespace): its
// name, whether its queues run commands (or only flushes) inline on the submitting thread
// (nvme/emu_ns.h, `inline=`), how many they did, and the commands run again after a transient
// host answer; its volatile write cache, where it has one (nvme/emu_write_cache.h).
struct DeviceStats {
  std::string name;
  bool inline_io = false;
  bool inline_flush = false;
  uint64_t inline_commands = 0;
  uint64_t host_retries = 0;
  uint64_t doorbells = 0;          // submission doorbells the NVMe driver rang
  uint64_t cover_misses = 0;       // requests a completion thread reaped while its queue was covered
  uint64_t retries = 0;            // commands the NVMe driver sent again after a failure
  uint64_t fixed_buffer_cmds = 0;  // commands through a buffer registered with the ring (fixedbufs)
  uint64_t write_cache_bytes = 0;  // 0: no write cache
  EmuWriteCacheStats write_cache;
};

}  // namespace biofs
