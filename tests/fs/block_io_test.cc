// The fs block I/O helper: sync and batched reads and writes as bios, flush, errors, async
// completion callbacks.
#include <doctest/doctest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "blockcore/brd.h"
#include "fs/block_io.h"
#include "fs/crc32c.h"
#include "fs/stats.h"

using namespace biofs;

TEST_CASE("crc32c: the standard check value and chaining") {
  CHECK(crc32c(0, "123456789", 9) == 0xE3069283u);
  CHECK(crc32c(crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
  CHECK(crc32c(0, "", 0) == 0u);
}

TEST_CASE("block io: blocks written synchronously read back; unwritten blocks are zero") {
  BrdDevice d(4 << 20);
  BlockIo io(d.bdev(), 4096);
  CHECK(io.nr_blocks() == 1024);
  IoBuf out(3 * 4096), in(3 * 4096);
  for (size_t i = 0; i < out.size(); i++) out.data()[i] = uint8_t(i * 13);
  CHECK(io.write(10, 3, out.data()) == 0);
  CHECK(io.read(10, 3, in.data()) == 0);
  CHECK(std::memcmp(in.data(), out.data(), out.size()) == 0);
  CHECK(io.read(13, 1, in.data()) == 0);
  for (int i = 0; i < 4096; i++) REQUIRE(in.data()[i] == 0);
  CHECK(io.bios >= 3);
}

TEST_CASE("block io: a batch of many bios under one plug, and more than 1 MiB in one call") {
  BrdDevice d(8 << 20);
  BlockIo io(d.bdev(), 4096, false);
  IoBuf big(3 << 20);
  for (size_t i = 0; i < big.size(); i++) big.data()[i] = uint8_t(i ^ (i >> 12));
  IoBatch b(&io);
  b.write(0, 1, big.data());
  b.write(700, 767, big.data() + 4096);  // crosses several bios
  CHECK(b.wait() == 0);
  IoBuf back(3 << 20);
  CHECK(io.read(700, 767, back.data() + 4096) == 0);
  CHECK(std::memcmp(back.data() + 4096, big.data() + 4096, 767 * 4096) == 0);
}

TEST_CASE("block io: I/O past the end reports -EIO and flush succeeds") {
  BrdDevice d(1 << 20);
  BlockIo io(d.bdev(), 4096);
  IoBuf buf(4096);
  CHECK(io.write(256, 1, buf.data()) == -EIO);
  CHECK(io.errors == 1);
  CHECK(io.flush() == 0);
  CHECK(d.flushes() == 1);
  CHECK(io.write(255, 1, buf.data(), REQ_FUA | REQ_PREFLUSH) == 0);
}

TEST_CASE("block io: an async batch calls its callback once with the status") {
  BrdDevice d(1 << 20);
  BlockIo io(d.bdev(), 4096);
  IoBuf buf(8192);
  int calls = 0, status = 1;
  {
    IoBatch b(&io);
    b.on_complete([&](int st) { calls++, status = st; });
    b.read(0, 2, buf.data());
    b.submit();
  }
  CHECK(calls == 1);
  CHECK(status == 0);
}

TEST_CASE("stats: the counters export is one JSON object, its sections in order, its numbers typed as the tools read them") {
  BrdDevice d(4 << 20);
  BlockIo io(d.bdev(), 4096);
  const std::string before = stats_json(io);
  CHECK(before.back() == '\n');
  const auto idle = nlohmann::ordered_json::parse(before);
  std::vector<std::string> keys;
  for (const auto& [k, v] : idle.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"version", "pid", "time_s", "rss_bytes", "bio_cache", "queue", "io", "stages"});
  CHECK(idle["version"] == 1);
  CHECK(idle["bio_cache"]["enabled"].is_boolean());
  CHECK(idle["bio_cache"]["hit_rate"].is_number_integer());  // no allocations yet: 0, as "%.6g" writes it
  CHECK(idle["queue"]["tag_batch"].is_string());

  IoBuf buf(4096);
  for (int i = 0; i < 64; i++) REQUIRE(io.write(uint64_t(i), 1, buf.data()) == 0);
  const auto busy = nlohmann::ordered_json::parse(stats_json(io));
  CHECK(busy["io"]["writes"].get<uint64_t>() >= idle["io"]["writes"].get<uint64_t>() + 64);
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
