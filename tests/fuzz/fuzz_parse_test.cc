// Malformed mount options, device strings and xattr blocks: each is refused with one printable
// line that names the part at fault (the tables are the cases the fuzz harnesses generalise).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fs/format.h"
#include "daemon/mount_options.h"
#include "fs/xattr_block.h"
#include "devices/open_device.h"

using namespace biofs;

namespace {

void one_printable_line(const std::string& msg) {
  CHECK(!msg.empty());
  for (char c : msg) CHECK_MESSAGE(static_cast<unsigned char>(c) >= 0x20, msg);
}

}  // namespace

TEST_CASE("malformed mount options: one line naming the option") {
  const struct {
    const char* list;
    const char* names;
  } table[] = {
      {"frobnicate", "'frobnicate'"},
      {"bio_cache=maybe", "bio_cache"},
      {"bio_cache", "bio_cache"},
      {"tag_batch=", "tag_batch"},
      {"split_check=slow", "split_check"},
      {"queues=0", "queues"},
      {"queues=257", "queues"},
      {"queues=1x", "queues"},
      {"queues=-1", "queues"},
      {"queues=99999999999", "queues"},
      {"qd=4097", "qd"},
      {"commit=3601", "commit"},
      {"meta_cache=0", "meta_cache"},
      {"writeback_cache=1", "writeback_cache: '1'"},
      {"ro=yes", "ro=yes"},
      {"allow_other=yes", "allow_other=yes"},
      {"fsname=", "fsname"},
      {"bio_cache=off,qd=abc,ro", "qd"},
      {"=x", "'=x'"},
      {"bio_cache=o\nff", "'bio_cache=o\\x0aff' holds a control character"},
      {"qd=1\r,ro", "qd=1\\x0d"},
      {"bad\x1b[2Joption", "bad\\x1b[2Joption"},
  };
  for (const auto& row : table) {
    DaemonOptions o;
    const Status s = parse_mount_options(row.list, &o);
    CHECK_FALSE(s.ok());
    const std::string& msg = s.message();
    INFO("options '" << row.list << "': " << msg);
    one_printable_line(msg);
    CHECK(msg.find(row.names) != std::string::npos);
  }
}

TEST_CASE("malformed device strings: one line naming the part") {
  const struct {
    const char* spec;
    const char* names;
  } table[] = {
      {"", "empty device string"},
      {"emu:", "no path"},
      {"foo:bar", "'foo:'"},
      {"emu:/x,lba=1024", "lba=1024"},
      {"emu:/x,mdts=11", "mdts=11"},
      {"emu:/x,size=0", "size=0"},
      {"emu:/x,size=12Q", "size=12Q"},
      {"emu:/x,size=99999999999T", "size=99999999999T"},
      {"emu:/x,vwc=1", "vwc=1"},
      {"emu:/x,regfiles", "regfiles"},
      {"emu:/x,bogus", "bogus"},
      {"nvme:/dev/ng0n1,lba=512", "lba=512"},
      {"nvme:/dev/ng0n1,sqpoll=2", "sqpoll=2"},
      {"null:0", "null:0"},
      {"null:12Q", "12Q"},
      {"null:", "null:"},
      {"emu:/x\n,vwc", "'emu:/x\\x0a,vwc' holds a control character"},
      {"null:1\x07G", "null:1\\x07G"},
  };
  for (const auto& row : table) {
    DeviceSpec ds;
    INFO("device '" << row.spec << "'");
    const Status s = parse_device_spec(row.spec, &ds);
    CHECK_FALSE(s.ok());
    const std::string& err = s.message();
    INFO(err);
    one_printable_line(err);
    CHECK(err.find(row.names) != std::string::npos);
  }
}

TEST_CASE("malformed xattr blocks: one line naming the damage, the entries before it kept") {
  using namespace biofs::disk;
  constexpr uint32_t bs = 1024;
  constexpr uint64_t blk = 100, owner = 7;
  const std::vector<xattr::Attr> attrs = {
      {"user.a", "1"}, {"user.bb", std::string(300, 'x')}, {"security.capability", std::string(20, 'c')}};
  std::vector<uint8_t> good(bs);
  xattr::pack_block(good.data(), bs, blk, owner, attrs);
  set_block_crc(good.data(), bs);
  xattr::ParsedBlock p = xattr::parse_block(good.data(), bs, blk, owner, true);
  REQUIRE(p.state == xattr::BlockState::ok);
  REQUIRE(p.attrs.size() == 3);
  CHECK(p.attrs[1].value == attrs[1].value);
  const uint32_t first = XATTR_BLOCK_ENTRY_HEAD + 6 + 1, second = XATTR_BLOCK_ENTRY_HEAD + 7 + 300;
  const uint32_t e0 = sizeof(XattrBlock), e1 = e0 + first, e2 = e1 + second;
  auto u16 = [](std::vector<uint8_t>& b, uint32_t at, uint16_t v) { std::memcpy(&b[at], &v, 2); };
  auto u32 = [](std::vector<uint8_t>& b, uint32_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); };
  const struct {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> damage;
    bool fix_crc;
    xattr::BlockState state;
    std::string names;
    size_t kept;
  } table[] = {
      {"magic", [](auto& b) { b[0] = 'X'; }, true, xattr::BlockState::bad_header, "fails its checksum or header check", 0},
      {"block number", [](auto& b) { b[8] = 101; }, true, xattr::BlockState::bad_header, "header check", 0},
      {"stale crc", [&](auto& b) { b[e1 + 20] ^= 1; }, false, xattr::BlockState::bad_header, "fails its checksum", 0},
      {"owner", [](auto& b) { b[16] = 8; }, true, xattr::BlockState::bad_header, "belongs to inode 8", 0},
      {"reserved", [&](auto& b) { u32(b, 28, 1); }, true, xattr::BlockState::bad_header, "nonzero reserved field", 0},
      {"used past the block", [&](auto& b) { u32(b, 24, bs - 31); }, true, xattr::BlockState::bad_header,
       "says 993 bytes of entries, more than it holds", 0},
      {"empty name", [&](auto& b) { b[e0] = 0; }, true, xattr::BlockState::bad_entries, "malformed entry at byte 32", 0},
      {"entry reserved byte", [&](auto& b) { b[e1 + 1] = 3; }, true, xattr::BlockState::bad_entries,
       "malformed entry at byte " + std::to_string(e1), 1},
      {"value past used", [&](auto& b) { u16(b, e2 + 2, 60000); }, true, xattr::BlockState::bad_entries,
       "entry running past its end at byte " + std::to_string(e2), 2},
      {"name past used", [&](auto& b) { b[e2] = 255; }, true, xattr::BlockState::bad_entries, "running past its end", 2},
      {"used ends inside an entry head", [&](auto& b) { u32(b, 24, first + second + 2); }, true,
       xattr::BlockState::bad_entries, "entry cut short at byte " + std::to_string(e2), 2},
      {"used ends after two entries", [&](auto& b) { u32(b, 24, first + second); }, true, xattr::BlockState::ok, "", 2},
  };
  for (const auto& row : table) {
    std::vector<uint8_t> b = good;
    row.damage(b);
    if (row.fix_crc) set_block_crc(b.data(), bs);
    p = xattr::parse_block(b.data(), bs, blk, owner, true);
    INFO(row.what << ": " << p.why);
    CHECK(p.state == row.state);
    CHECK(p.attrs.size() == row.kept);
    if (row.state == xattr::BlockState::ok) continue;
    one_printable_line(p.why);
    CHECK(p.why.find(row.names) != std::string::npos);
  }
}
