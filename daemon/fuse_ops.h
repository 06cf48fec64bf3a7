// The FUSE low-level operations table over a Filesystem (libfuse3, API 3.12).
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fs/filesystem.h"

namespace biofs {

struct FuseContext {
  Filesystem* fs;
  bool writeback_cache = false;
  unsigned max_background = 256;
  uid_t owner = 0;  // the mounting user: with root, the only one who may read the stats
  // keep_cache=on: the kernel keeps file pages across opens, directory listings, attributes and
  // names (negative ones too) for a day; biofs is its image's only writer and the kernel sees
  // every change. off: pages dropped at each open, 1 s timeouts (every buffered read reaches
  // the block layer).
  bool keep_cache = true;
  bool posix_acl = false;  // the kernel took FUSE_CAP_POSIX_ACL (op_init)
  double timeout() const { return keep_cache ? 86400.0 : 1.0; }
};

// The operations; userdata passed to fuse_session_new must be a FuseContext*.
const fuse_lowlevel_ops* biofs_fuse_ops();

}  // namespace biofs
