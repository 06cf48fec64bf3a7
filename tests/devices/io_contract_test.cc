// The mount-time I/O contract (devices/io_contract.h): read off opened devices whose limits are
// known from their strings, every figure is the device's own, and what was asked for but is not
// there is named.
#include <doctest/doctest.h>

#include <string>

#include "devices/io_contract.h"
#include "devices/open_device.h"
#include "tests/nvme/nvme_test_util.h"

using namespace biofs;
using namespace biofs::test;

namespace {

std::string all_lines(const IoContract& c) {
  std::string s;
  for (const std::string& line : io_contract_lines(c)) {
    CHECK(line.find('\n') == std::string::npos);
    s += line + "\n";
  }
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("io contract: an emulated namespace's LBA size, MDTS and the limits derived from them") {
  TempPath img("contract");
  DeviceOptions asked;
  asked.queues = 2;
  asked.qd = 64;
  asked.poll_queues = 1;
  asked.toggles.bio_cache = BioCache::off;
  auto dev = open_test_device("emu:" + img.path + ",size=8M,lba=4096,mdts=3,vwc", asked);
  const IoContract c = io_contract(*dev, asked);
  CHECK(contains(c.device, "emu:" + img.path));
  CHECK(c.lba_size == 4096);
  CHECK(c.mdts_bytes == 32768);  // 4 KiB << 3
  CHECK(c.limits.max_hw_sectors == 64);  // one command's worth: 32 KiB
  CHECK(c.limits.max_sectors == 64);
  CHECK(c.limits.virt_boundary_mask == 4095);  // NVMe PRPs
  CHECK(c.limits.write_cache);
  CHECK(c.hw_queues == 2);
  CHECK(c.poll_queues == 1);
  CHECK(c.queue_depth == 64);
  bool bio_cache_off = false;
  for (const auto& [name, value] : c.toggles) bio_cache_off |= name == "bio_cache" && value == "off";
  CHECK(bio_cache_off);
  CHECK(c.unavailable.empty());
  const std::string text = all_lines(c);
  CHECK(contains(text, "lba 4 KiB, mdts 32 KiB"));
  CHECK(contains(text, "max 32 KiB per request"));
  CHECK(contains(text, "virt boundary 0xfff"));
  CHECK(contains(text, "queues 2 x 64 tags, 1 poll"));
  CHECK(contains(text, "bio_cache=off"));
  CHECK(contains(text, "volatile write cache"));
  CHECK_FALSE(contains(text, "not available"));
}

TEST_CASE("io contract: poll queues asked of a device that has none are named as not available") {
  DeviceOptions asked;
  asked.poll_queues = 2;
  auto dev = open_test_device("ram:16M", asked);
  const IoContract c = io_contract(*dev, asked);
  CHECK(c.mdts_bytes == 0);  // no controller
  CHECK(c.poll_queues == 0);
  REQUIRE(c.unavailable.size() == 1);
  CHECK(contains(c.unavailable[0], "poll_queues=2: this device has 0"));
  const std::string text = all_lines(c);
  CHECK(contains(text, "mdts none"));
  CHECK(contains(text, "not available: poll_queues=2"));
}

TEST_CASE("io contract: a striped target reports its children's queues") {
  DeviceOptions asked;
  asked.qd = 32;
  auto dev = open_test_device("stripe:2", asked);
  const IoContract c = io_contract(*dev, asked);
  CHECK(contains(c.device, "striped"));
  CHECK(c.queue_depth == 32);
  CHECK(c.hw_queues == 1);
}
