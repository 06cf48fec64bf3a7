// biofs-bench's numbers as t/io_uring prints them (tools/bench/tio_format.h): every IOPS line
// and Maximum IOPS line of the captured t/io_uring outputs (tests/tools/data/t_io_uring/, fio
// f5344384f7c7) is rebuilt from its own figures and must come out byte for byte; then the
// thresholds at their edges, the BW rule's integer divisions, IOS/call and the batch clamp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <string>
#include <vector>

#include "tio_format.h"

using namespace biofs::bench;

namespace {

// "82528" -> 82528, "655.46K" -> 655460, "8.14M" -> 8140000: a count t/io_uring prints that way.
uint64_t parse_count(const std::string& s) {
  const double v = std::strtod(s.c_str(), nullptr);
  if (s.back() == 'M') return uint64_t(std::llround(v * 1e6));
  if (s.back() == 'K') return uint64_t(std::llround(v * 1e3));
  return std::strtoull(s.c_str(), nullptr, 10);
}

// The value of a flag on the captured command line ("-b1048576"), or `dflt`.
long flag(const std::string& cmd, const std::string& name, long dflt) {
  const size_t at = cmd.find(" " + name);
  return at == std::string::npos ? dflt : std::strtol(cmd.c_str() + at + 1 + name.size(), nullptr, 10);
}

std::vector<std::string> data_files() {
  std::vector<std::string> out;
  if (DIR* d = opendir(BIOFS_TIO_DATA)) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 4 && n.substr(n.size() - 4) == ".txt") out.push_back(std::string(BIOFS_TIO_DATA) + "/" + n);
    }
    closedir(d);
  }
  return out;
}

}  // namespace

TEST_CASE("t/io_uring format: every IOPS and Maximum IOPS line captured from t/io_uring comes out the same") {
  const std::vector<std::string> files = data_files();
  REQUIRE(files.size() >= 8);
  int checked = 0, with_k = 0, with_m = 0, with_gib = 0;
  for (const std::string& path : files) {
    std::ifstream in(path);
    std::string cmd, line;
    REQUIRE(std::getline(in, cmd));
    REQUIRE(cmd.rfind("$ t/io_uring", 0) == 0);
    const uint64_t bs = uint64_t(flag(cmd, "-b", 4096));
    const bool nop = flag(cmd, "-N", 0) != 0;
    while (std::getline(in, line)) {
      CAPTURE(path);
      CAPTURE(line);
      if (line.rfind("IOPS=", 0) == 0) {
        const size_t comma = line.find(',');
        const uint64_t iops = parse_count(line.substr(5, comma - 5));
        const size_t calls = line.find("IOS/call=");
        REQUIRE(calls != std::string::npos);
        const uint64_t s = std::strtoull(line.c_str() + calls + 9, nullptr, 10);
        const uint64_t c = std::strtoull(line.c_str() + line.find('/', calls + 9) + 1, nullptr, 10);
        // One call's worth: the divisions give back s and c.
        CHECK(tio_interval_line(iops, bs, nop, s, c, 1) == line);
        CHECK(tio_interval_line(iops, bs, nop, s * 7 + 6, c * 7 + 6, 7) == line);  // truncated, not rounded
        with_k += line.find("K,") != std::string::npos;
        with_m += line.find("M,") != std::string::npos;
        with_gib += line.find("GiB/s") != std::string::npos;
        checked++;
      } else if (line.rfind("Maximum IOPS=", 0) == 0) {
        CHECK(tio_max_line(parse_count(line.substr(13))) == line);
        checked++;
      }
    }
  }
  CHECK(checked >= 22);  // 14 IOPS lines and 8 Maximum IOPS lines in the 9 files
  CHECK(with_k >= 1);  // the files hold each unit: K, M, GiB/s
  CHECK(with_m >= 1);
  CHECK(with_gib >= 1);
}

TEST_CASE("t/io_uring format: IOPS suffixes switch strictly above 1e5 and 1e6") {
  CHECK(tio_iops(0) == "0");
  CHECK(tio_iops(14138) == "14138");
  CHECK(tio_iops(100000) == "100000");
  CHECK(tio_iops(100001) == "100.00K");
  CHECK(tio_iops(655464) == "655.46K");
  CHECK(tio_iops(1000000) == "1000.00K");
  CHECK(tio_iops(1000001) == "1.00M");
  CHECK(tio_iops(8634999) == "8.63M");
  CHECK(tio_max_line(82528) == "Maximum IOPS=82528");
}

TEST_CASE("t/io_uring format: BW is whole MiB/s by integer division, GiB/s above 2000 as MiB/s / 1000") {
  CHECK(tio_bw(14138, 4096) == "55MiB/s");          // 14138 / 256
  CHECK(tio_bw(511999, 4096) == "1999MiB/s");
  CHECK(tio_bw(512255, 4096) == "2000MiB/s");       // 2000.99 -> 2000: not above 2000
  CHECK(tio_bw(512256, 4096) == "2.00GiB/s");       // 2001 -> 2.001, printed 2.00
  CHECK(tio_bw(655460, 4096) == "2.56GiB/s");       // 2560 / 1000, not / 1024
  CHECK(tio_bw(1108, 1048576) == "1108MiB/s");
  CHECK(tio_bw(2047, 1536) == "3MiB/s");            // 1 MiB / 1536 = 682 (integer)
  CHECK(tio_bw(1500, 2097152) == "3.00GiB/s");      // above 1 MiB: IOPS * (bs / 1 MiB)
  CHECK(tio_bw(255, 4096) == "0MiB/s");
  CHECK(tio_interval_line(8140000, 4096, true, 32, 32, 1) == "IOPS=8.14M, IOS/call=32/32");  // no BW for nop
}

TEST_CASE("t/io_uring format: IOS/call divides per interval, -1/-1 without a call") {
  CHECK(tio_ios_per_call(0, 0, 0) == "-1/-1");
  CHECK(tio_ios_per_call(63, 31, 2) == "31/15");
  CHECK(tio_ios_per_call(5, 3, 4) == "1/0");
  CHECK(tio_interval_line(37964, 4096, false, 5, 3, 4) == "IOPS=37964, BW=148MiB/s, IOS/call=1/0");
}

TEST_CASE("t/io_uring batch rule: 0 means 1, more than the depth means the depth") {
  CHECK(tio_clamp_batch(0, 4) == 1);
  CHECK(tio_clamp_batch(99, 4) == 4);
  CHECK(tio_clamp_batch(32, 128) == 32);
  CHECK(tio_clamp_batch(0, 1) == 1);
  CHECK(tio_clamp_batch(128, 128) == 128);
}
