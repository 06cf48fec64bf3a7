// biofs-bench: benchmarks of the block core alone, in the manner of fio's t/io_uring.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "alloc_bench.h"
#include "fsio_bench.h"
#include "io_bench.h"

int main(int argc, char** argv) {
  if (argc >= 2 && (!std::strcmp(argv[1], "-h"))) {
    std::printf("usage: biofs-bench [io] [options] [DEV...]  the block core, t/io_uring style (--help)\n"
                "       biofs-bench alloc [options]          bio alloc+put cost, cache off vs on (--help)\n"
                "       biofs-bench fsio [options]           the filesystem's file I/O in-process, fixed I/O count (--help)\n");
    return 0;
  }
  try {
    if (argc >= 2 && !std::strcmp(argv[1], "alloc")) return biofs::bench::alloc_main(argc - 1, argv + 1);
    if (argc >= 2 && !std::strcmp(argv[1], "io")) return biofs::bench::io_main(argc - 1, argv + 1);
    if (argc >= 2 && !std::strcmp(argv[1], "fsio")) return biofs::bench::fsio_main(argc - 1, argv + 1);
    // A first word that names a device (null, stripe:2, /dev/ng0n1, ./img) is t/io_uring's file name.
    if (argc >= 2 && argv[1][0] != '-' && (!std::strcmp(argv[1], "null") || std::strchr(argv[1], ':') ||
                                           std::strchr(argv[1], '/')))
      return biofs::bench::io_main(argc, argv);
    if (argc >= 2 && argv[1][0] != '-') {
      std::fprintf(stderr, "biofs-bench: unknown mode '%s' (modes: io, alloc, fsio; try -h)\n", argv[1]);
      return 2;
    }
    return biofs::bench::io_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofs-bench: %s\n", e.what());
    return 2;
  }
}
