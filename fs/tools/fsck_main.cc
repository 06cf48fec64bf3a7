// fsck.biofs: checks a biofs filesystem.
//   fsck.biofs [-n] [-f] [-v] DEVICE
// Exit status as fsck(8): 0 no errors, 4 errors left uncorrected, 8 operational error,
// 16 usage error. Repair (-y, -p) is not implemented yet: those flags are refused.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fs/fsck.h"
#include "fs/tools/device_lock.h"
#include "nvme/open_device.h"

using namespace biofs;

int main(int argc, char** argv) {
  bool verbose = false;
  int c;
  while ((c = getopt(argc, argv, "nfvyp")) != -1) {
    switch (c) {
      case 'n': break;
      case 'f': break;  // always a full check
      case 'v': verbose = true; break;
      case 'y':
      case 'p':
        fprintf(stderr, "fsck.biofs: -%c: repair is not implemented yet; use -n to check\n", c);
        return 16;
      default:
        fprintf(stderr, "usage: fsck.biofs [-n] [-f] [-v] DEVICE\n");
        return 16;
    }
  }
  if (optind + 1 != argc) {
    fprintf(stderr, "usage: fsck.biofs [-n] [-f] [-v] DEVICE\n");
    return 16;
  }
  const std::string spec = argv[optind];
  // Shared: several checks may run together, but not on a mounted filesystem.
  DeviceLock lock;
  if (std::string why = lock.acquire(spec, false, 0); !why.empty()) {
    fprintf(stderr, "fsck.biofs: %s\n", why.c_str());
    return 8;
  }
  std::unique_ptr<Device> dev;
  try {
    dev = open_device(spec, DeviceOptions{});
  } catch (const std::exception& e) {
    fprintf(stderr, "fsck.biofs: %s\n", e.what());
    return 8;
  }
  BlockIo io(dev->bdev(), 4096);
  const FsckResult r = fsck_check(io, [&](const std::string& line) { printf("%s: %s\n", spec.c_str(), line.c_str()); });
  if (r.fatal) {
    fprintf(stderr, "fsck.biofs: %s: cannot check this filesystem\n", spec.c_str());
    return 8;
  }
  if (verbose || r.errors)
    printf("%s: %llu inodes (%llu directories), %llu blocks in use, %llu errors\n", spec.c_str(),
           (unsigned long long)r.inodes, (unsigned long long)r.dirs, (unsigned long long)r.blocks_used,
           (unsigned long long)r.errors);
  else
    printf("%s: clean, %llu inodes, %llu blocks in use\n", spec.c_str(), (unsigned long long)r.inodes,
           (unsigned long long)r.blocks_used);
  return r.errors ? 4 : 0;
}
