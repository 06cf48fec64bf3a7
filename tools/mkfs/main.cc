// mkfs.biofs: makes a biofs filesystem.
//   mkfs.biofs [-b BLOCKSIZE] [-N INODES] [-L LABEL] [-J JOURNAL_BLOCKS] [-f] [-q] DEVICE
#include <unistd.h>
#include <uuid/uuid.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "fs/mkfs.h"
#include "devices/device_lock.h"
#include "devices/open_device.h"
#include "lib/parse_number.h"

using namespace biofs;

static void usage() {
  fputs("usage: mkfs.biofs [-b BLOCKSIZE] [-N INODES] [-L LABEL] [-J JOURNAL_BLOCKS] [-f] [-q] DEVICE\n", stderr);
}

static bool number(const char* s, uint64_t* out) { return parse_uint(s, out); }

int main(int argc, char** argv) {
  MkfsOptions o;
  bool quiet = false;
  int c;
  uint64_t v;
  for (int i = 1; i < argc; i++)
    if (std::string(argv[i]) == "--help") {
      usage();
      return 0;
    }
  while ((c = getopt(argc, argv, "b:N:L:J:fqh")) != -1) {
    switch (c) {
      case 'b':
        if (!number(optarg, &v) || v > UINT32_MAX) {
          fprintf(stderr, "mkfs.biofs: bad block size '%s'\n", optarg);
          return 1;
        }
        o.block_size = uint32_t(v);
        break;
      case 'N':
        if (!number(optarg, &v) || v == 0) {
          fprintf(stderr, "mkfs.biofs: bad inode count '%s'\n", optarg);
          return 1;
        }
        o.inodes = v;
        break;
      case 'J':
        if (!number(optarg, &v) || v == 0) {
          fprintf(stderr, "mkfs.biofs: bad journal size '%s'\n", optarg);
          return 1;
        }
        o.journal_blocks = v;
        break;
      case 'L': o.label = optarg; break;
      case 'f': o.force = true; break;
      case 'q': quiet = true; break;
      case 'h': usage(); return 0;
      default: usage(); return 1;
    }
  }
  if (optind + 1 != argc) {
    usage();
    return 1;
  }
  const std::string spec = argv[optind];
  DeviceLock lock;
  std::unique_ptr<Device> dev;
  if (Status s = open_device_locked(spec, DeviceOptions{}, &lock, true, "mkfs.biofs", &dev); !s.ok()) {
    fprintf(stderr, "mkfs.biofs: %s\n", s.message().c_str());
    return 1;
  }
  if (dev->kind() == DeviceSpec::Kind::ram) {
    fprintf(stderr, "mkfs.biofs: %s: a RAM disk lives only inside the daemon, which formats it when it mounts\n",
            spec.c_str());
    return 1;
  }
  BlockIo io(dev->bdev(), 4096);
  if (int e = io.init(); e) {
    fprintf(stderr, "mkfs.biofs: %s: %s\n", spec.c_str(), bioset_init_error(e).c_str());
    return 1;
  }
  const bool tty = isatty(2) && !quiet;
  o.progress = [&](uint64_t done, uint64_t total) {
    if (tty && total >= 4096) fprintf(stderr, "\rmkfs.biofs: writing metadata %3u%%", unsigned(done * 100 / total));
  };
  disk::SuperBlock sb;
  const Status made = make_filesystem(io, o, &sb);
  if (tty) fputs("\r\033[K", stderr);
  if (!made.ok()) {
    fprintf(stderr, "mkfs.biofs: %s: %s\n", spec.c_str(), made.message().c_str());
    return 1;
  }
  if (!quiet) {
    char uuid[37];
    uuid_unparse_lower(sb.uuid, uuid);
    printf("biofs on %s: %llu blocks of %u bytes, %llu inodes, journal %llu blocks, label '%s', uuid %s\n",
           spec.c_str(), (unsigned long long)sb.block_count, sb.block_size, (unsigned long long)sb.inode_count,
           (unsigned long long)sb.journal_blocks, sb.label, uuid);
  }
  return 0;
}
