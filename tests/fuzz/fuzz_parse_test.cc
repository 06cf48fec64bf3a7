// Malformed mount options and device strings: each is refused with one printable line that
// names the part at fault (the tables are the cases the fuzz harnesses generalise).
#include <doctest/doctest.h>

#include <string>

#include "fs/mount_options.h"
#include "nvme/open_device.h"

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
      {"writeback_cache=1", "writeback_cache=1"},
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
    const std::string msg = parse_mount_options(row.list, &o);
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
    std::string err;
    INFO("device '" << row.spec << "'");
    CHECK_FALSE(parse_device_spec(row.spec, &ds, &err));
    INFO(err);
    one_printable_line(err);
    CHECK(err.find(row.names) != std::string::npos);
  }
}
