// The FUSE low-level operations table over a Filesystem (libfuse3, API 3.12).
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "filesystem.h"

namespace biofs {

struct FuseContext {
  Filesystem* fs;
  bool writeback_cache = false;
  unsigned max_background = 256;
  uid_t owner = 0;  // the mounting user: with root, the only one who may read the stats
};

// The operations; userdata passed to fuse_session_new must be a FuseContext*.
const fuse_lowlevel_ops* biofs_fuse_ops();

}  // namespace biofs
