// biofs-bench: benchmarks of the block core alone, in the manner of fio's t/io_uring.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "alloc_bench.h"

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: biofs-bench alloc [options]   bio alloc+put cost, cache off vs on\n"
                "       biofs-bench alloc --help      options of a mode\n");
    return argc < 2 ? 2 : 0;
  }
  try {
    if (!std::strcmp(argv[1], "alloc")) return biofs::bench::alloc_main(argc - 1, argv + 1);
    std::fprintf(stderr, "biofs-bench: unknown mode '%s' (try --help)\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofs-bench: %s\n", e.what());
    return 2;
  }
}
