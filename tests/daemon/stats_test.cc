// The stats xattr's export (daemon/stats.h): one JSON object whose sections, order and number
// types are what tools/biofs-stat and biofs-compare read.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blockcore/brd.h"
#include "daemon/stats.h"
#include "fs/block_io.h"
#include "fs/io_buf.h"

using namespace biofs;

TEST_CASE("stats: the counters export is one JSON object, its sections in order, its numbers typed as the tools read them") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(4 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  const std::string before = stats_json(io);
  CHECK(before.back() == '\n');
  const auto idle = nlohmann::ordered_json::parse(before);
  std::vector<std::string> keys;
  for (const auto& [k, v] : idle.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"version", "pid", "time_s", "time_ns", "cpu_ns", "rss_bytes", "bio_cache", "queue", "io", "stages"});
  CHECK(idle["version"] == 1);
  CHECK(idle["bio_cache"]["enabled"].is_boolean());
  CHECK(idle["bio_cache"]["hit_rate"].is_number_integer());  // no allocations yet: 0, as "%.6g" writes it
  CHECK(idle["queue"]["tag_batch"].is_string());
  CHECK(idle["queue"]["nomerges"] == "0");  // the kernel's default: every merge tried
  CHECK(idle["queue"]["write_merges"].is_number_unsigned());

  IoBuf buf(4096);
  for (int i = 0; i < 64; i++) REQUIRE(io.write(uint64_t(i), 1, buf.data()) == 0);
  const auto busy = nlohmann::ordered_json::parse(stats_json(io));
  CHECK(busy["io"]["writes"].get<uint64_t>() >= idle["io"]["writes"].get<uint64_t>() + 64);
  // The snapshot's clock and the process's CPU time: both move forward, in nanoseconds.
  CHECK(busy["time_ns"].get<uint64_t>() > idle["time_ns"].get<uint64_t>());
  CHECK(busy["time_ns"].get<uint64_t>() / 1000000000u == busy["time_s"].get<uint64_t>());
  CHECK(busy["cpu_ns"].get<uint64_t>() > idle["cpu_ns"].get<uint64_t>());
  CHECK(busy["io"]["fs_bios"].is_number_unsigned());
  const auto& rate = busy["bio_cache"]["hit_rate"];
  CHECK(rate.is_number());
  CHECK(rate.get<double>() > 0.5);
  CHECK(busy["stages"]["sample"].is_number_unsigned());
  for (const auto& [name, st] : busy["stages"].items()) {
    if (!st.is_object()) continue;
    CAPTURE(name);
    CHECK(st["count"].is_number_unsigned());
    CHECK(st["buckets"].is_array());
    for (const auto& b : st["buckets"]) CHECK((b.is_array() && b.size() == 2));
  }
}
