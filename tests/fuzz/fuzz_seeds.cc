// Writes the seed corpus of every harness: DIR/seeds/NAME/seed-N, and makes the empty working
// corpus directories DIR/corpus/NAME and DIR/artifacts that libFuzzer fills.
//   biofs-fuzz-seeds DIR
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "fuzz_targets.h"

static bool mkdirs(const std::string& path) {
  for (size_t at = 1; at != std::string::npos;) {
    at = path.find('/', at + 1);
    const std::string p = path.substr(0, at);
    if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
      fprintf(stderr, "biofs-fuzz-seeds: cannot make %s: %s\n", p.c_str(), strerror(errno));
      return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: biofs-fuzz-seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  if (!mkdirs(dir + "/artifacts")) return 1;
  for (const auto& t : biofs::fuzz::targets()) {
    const std::string sd = dir + "/seeds/" + t.name;
    if (!mkdirs(sd) || !mkdirs(dir + "/corpus/" + t.name)) return 1;
    const auto seeds = biofs::fuzz::seeds(t.name);
    for (size_t i = 0; i < seeds.size(); i++) {
      const std::string path = sd + "/seed-" + std::to_string(i);
      FILE* f = fopen(path.c_str(), "wb");
      if (!f || fwrite(seeds[i].data(), 1, seeds[i].size(), f) != seeds[i].size() || fclose(f) != 0) {
        fprintf(stderr, "biofs-fuzz-seeds: cannot write %s\n", path.c_str());
        return 1;
      }
    }
    printf("%-14s %zu seeds\n", t.name, seeds.size());
  }
  return 0;
}
