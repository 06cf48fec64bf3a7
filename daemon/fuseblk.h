// blkdev=PATH: a fuseblk mount. The kernel opens PATH, the block device of the storage the
// daemon reaches by its own path (nvme:/dev/ngXnY's /dev/nvmeXnY; an emu: image's loop
// device), holding it exclusively while mounted; in return it sends the daemon FUSE_SYNCFS on
// sync(2) and syncfs(2) (syncfs.h) and waits for FUSE_DESTROY at unmount. The kernel itself
// reads and writes nothing through PATH.
#pragma once

#include <string>

#include "lib/status.h"

namespace biofs {

// Whether `blkdev` is a block device of the storage `device` (a device string) names: ok, or
// one line saying what it is instead.
Status check_blkdev(const std::string& device, const std::string& blkdev);

}  // namespace biofs
