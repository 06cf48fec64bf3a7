// `-o` options of the biofs daemon: the block-core toggles, queue settings and filesystem
// settings are ours; a known set of generic/FUSE options passes through to libfuse; anything
// else stops the mount with one line naming the option.
#pragma once

#include <string>
#include <vector>

#include "blockcore/blk_mq.h"
#include "filesystem.h"

namespace biofs {

struct DaemonOptions {
  bool bio_cache = true;      // bio_cache=on|off
  QueueToggles toggles;       // tag_batch=off|plain|retain|loop, split_check=fast|iter
  unsigned queues = 1;        // queues=N
  unsigned qd = 128;          // qd=N
  unsigned threads = 16;         // threads=N: FUSE worker threads at most
  unsigned max_background = 256; // max_background=N: async FUSE requests the kernel keeps in flight
  MountOptions fs;            // commit=SECONDS, meta_cache=MiB, ro
  bool writeback_cache = false;  // writeback_cache[=on|off]: the kernel caches buffered writes (fs/README.md)
  bool keep_cache = true;        // keep_cache=on|off: the kernel's caches kept across opens (fuse_ops.h)
  std::vector<std::string> fuse_opts;  // passed to libfuse as -o
};

// Parses one comma-separated -o list into *o. "" or one line naming the bad option.
std::string parse_mount_options(const std::string& list, DaemonOptions* o);

}  // namespace biofs
