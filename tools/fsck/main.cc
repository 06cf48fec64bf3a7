// fsck.biofs: checks a biofs filesystem, and repairs it with -p or -y.
//   fsck.biofs [-n | -p | -a | -y] [-f] [-v] DEVICE
// -n checks only; -p (or -a) repairs what is safe without a human and names what needs -y;
// -y repairs everything it can. Exit status as fsck(8), summed: 0 no errors, 1 errors
// corrected, 4 errors left uncorrected, 8 operational error, 16 usage error, 32 cancelled
// (SIGINT/SIGTERM before the repairs are written).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "fs/fsck/fsck.h"
#include "devices/device_lock.h"
#include "devices/open_device.h"

using namespace biofs;

namespace {

std::atomic<bool> g_cancel{false};

void on_signal(int) { g_cancel.store(true); }

int usage() {
  fprintf(stderr, "usage: fsck.biofs [-n | -p | -a | -y] [-f] [-v] DEVICE\n"
                  "  -n check only   -p, -a repair what is safe   -y repair everything it can\n"
                  "  -f (always a full check)   -v counts even when clean\n");
  return 16;
}

}  // namespace

int main(int argc, char** argv) {
  bool verbose = false;
  char chosen = 0;
  FsckMode mode = FsckMode::check;
  int c;
  for (int i = 1; i < argc; i++)
    if (std::string(argv[i]) == "--help") {
      usage();
      return 0;
    }
  while ((c = getopt(argc, argv, "nfvypah")) != -1) {
    char m = 0;
    switch (c) {
      case 'n': m = 'n'; break;
      case 'y': m = 'y'; break;
      case 'p':
      case 'a': m = 'p'; break;
      case 'f': break;  // always a full check
      case 'v': verbose = true; break;
      case 'h': usage(); return 0;
      default: return usage();
    }
    if (!m) continue;
    if (chosen && chosen != m) {
      fprintf(stderr, "fsck.biofs: only one of -n, -p and -y\n");
      return 16;
    }
    chosen = m;
    mode = m == 'y' ? FsckMode::yes : m == 'p' ? FsckMode::preen : FsckMode::check;
  }
  if (optind + 1 != argc) return usage();
  const std::string spec = argv[optind];
  // Checks share the device; a repair must be alone on it. Neither runs on a mounted one.
  DeviceLock lock;
  std::unique_ptr<Device> dev;
  if (Status s = open_device_locked(spec, DeviceOptions{}, &lock, mode != FsckMode::check, "fsck.biofs", &dev);
      !s.ok()) {
    fprintf(stderr, "fsck.biofs: %s\n", s.message().c_str());
    return 8;
  }
  if (dev->kind() == DeviceSpec::Kind::ram) {
    fprintf(stderr, "fsck.biofs: %s: a RAM disk lives only inside the daemon, which formats it when it mounts\n",
            spec.c_str());
    return 8;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  BlockIo io(dev->bdev(), 4096);
  if (int e = io.init(); e) {
    fprintf(stderr, "fsck.biofs: %s: %s\n", spec.c_str(), bioset_init_error(e).c_str());
    return 8;
  }
  // Each line is printed when the next one comes: the last one, when the check could not go
  // on, is the reason, and goes into the single line that says so.
  std::string held;
  bool holding = false;
  const auto print = [&](const std::string& line) {
    if (holding) printf("%s: %s\n", spec.c_str(), held.c_str());
    held = line;
    holding = true;
  };
  const FsckResult r = fsck_repair(io, mode, print, &g_cancel);
  const int status = fsck_exit_code(r, mode);
  if (r.fatal) {
    fprintf(stderr, "fsck.biofs: %s: cannot %s this filesystem%s%s\n", spec.c_str(),
            mode == FsckMode::check ? "check" : "repair", holding ? ": " : "", held.c_str());
    return status;
  }
  if (holding) printf("%s: %s\n", spec.c_str(), held.c_str());
  if (r.cancelled) {
    fprintf(stderr, "fsck.biofs: %s: cancelled before writing any repair\n", spec.c_str());
    return status;
  }
  if (r.needs_yes)
    printf("%s: %llu problems need fsck.biofs -y; nothing but the journal was written\n", spec.c_str(),
           (unsigned long long)r.needs_yes);
  if (r.repaired)
    printf("%s: %llu repairs made\n", spec.c_str(), (unsigned long long)r.repaired);
  if (verbose || r.errors)
    printf("%s: %llu inodes (%llu directories), %llu blocks in use, %llu errors\n", spec.c_str(),
           (unsigned long long)r.inodes, (unsigned long long)r.dirs, (unsigned long long)r.blocks_used,
           (unsigned long long)r.errors);
  else
    printf("%s: clean, %llu inodes, %llu blocks in use\n", spec.c_str(), (unsigned long long)r.inodes,
           (unsigned long long)r.blocks_used);
  return status;
}
