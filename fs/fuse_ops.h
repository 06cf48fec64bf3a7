// The FUSE low-level operations table over a Filesystem (libfuse3, API 3.4).
#pragma once

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include "filesystem.h"

namespace biofs {

struct FuseContext {
  Filesystem* fs;
  bool writeback_cache = false;
};

// The operations; userdata passed to fuse_session_new must be a FuseContext*.
const fuse_lowlevel_ops* biofs_fuse_ops();

}  // namespace biofs
