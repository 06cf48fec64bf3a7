// Device strings: what parses, and the one-line errors for what does not; opening devices that
// are missing or are not what the string says (the passthrough error paths that need no NVMe
// device).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "devices/io_contract.h"
#include "blockcore/brd.h"
#include "blockcore/stripe.h"
#include "devices/open_device.h"
#include "tests/nvme/nvme_test_util.h"

using namespace biofs;
using namespace biofs::test;

namespace {

std::string parse_error(const std::string& spec) {
  DeviceSpec ds;
  const Status s = parse_device_spec(spec, &ds);
  if (s.ok()) return "";
  CHECK(s.code() == Status::Code::invalid_argument);
  CHECK(s.message().find('\n') == std::string::npos);
  return s.message();
}

// open_device's error line; it never throws for what the string says.
std::string open_error(const std::string& spec) {
  std::unique_ptr<Device> dev;
  Status s;
  CHECK_NOTHROW(s = open_device(spec, DeviceOptions{}, &dev));
  if (s.ok()) return "";
  CHECK_FALSE(dev);
  CHECK(s.message().find('\n') == std::string::npos);
  return s.message();
}

// The kind of open_device's error.
Status::Code open_code(const std::string& spec) {
  std::unique_ptr<Device> dev;
  return open_device(spec, DeviceOptions{}, &dev).code();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("device strings: the kinds and their options") {
  DeviceSpec ds;
  REQUIRE(parse_device_spec("emu:/tmp/a.img,lba=4096,mdts=7,vwc,buffered,size=2G", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::emu);
  CHECK(ds.emu.path == "/tmp/a.img");
  CHECK(ds.emu.lba_size == 4096);
  CHECK(ds.emu.mdts == 7);
  CHECK(ds.emu.vwc);
  CHECK(ds.emu.write_cache_bytes == (16u << 20));  // vwc alone: the cache at its default size
  CHECK(ds.emu.buffered);
  CHECK(ds.emu.create_size == (2ull << 30));
  CHECK(ds.emu.inline_io == EmuInline::automatic);
  REQUIRE(parse_device_spec("emu:/tmp/a.img,vwc=64M", &ds).ok());
  CHECK(ds.emu.vwc);
  CHECK(ds.emu.write_cache_bytes == (64u << 20));
  REQUIRE(parse_device_spec("emu:/tmp/a.img,vwc=through", &ds).ok());
  CHECK(ds.emu.vwc);
  CHECK(ds.emu.write_cache_bytes == 0);
  REQUIRE(parse_device_spec("emu:/tmp/a.img,inline=on", &ds).ok());
  CHECK(ds.emu.inline_io == EmuInline::on);
  REQUIRE(parse_device_spec("emu:/tmp/a.img,inline=off", &ds).ok());
  CHECK(ds.emu.inline_io == EmuInline::off);
  REQUIRE(parse_device_spec("emu:/tmp/a.img,inline=off,inline=auto", &ds).ok());
  CHECK(ds.emu.inline_io == EmuInline::automatic);

  REQUIRE(parse_device_spec("/var/tmp/plain.img", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::emu);
  CHECK(ds.emu.path == "/var/tmp/plain.img");
  CHECK(ds.emu.lba_size == 512);
  CHECK(ds.emu.mdts == 5);
  CHECK_FALSE(ds.emu.vwc);

  REQUIRE(parse_device_spec("relative.img,lba=512", &ds).ok());
  CHECK(ds.emu.path == "relative.img");

  REQUIRE(parse_device_spec("nvme:/dev/ng0n1,regfiles,fixedbufs,iopoll,sqpoll", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::nvme);
  CHECK(ds.nvme.path == "/dev/ng0n1");
  CHECK(ds.nvme.regfiles);
  CHECK(ds.nvme.fixedbufs);
  CHECK(ds.nvme.iopoll);
  CHECK(ds.nvme.sqpoll);

  REQUIRE(parse_device_spec("null:64M", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::null);
  CHECK(ds.null_blk.size_bytes == (64ull << 20));
  REQUIRE(parse_device_spec("null", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::null);
  REQUIRE(parse_device_spec("null:4G", &ds).ok());
  CHECK(ds.null_blk.size_bytes == 4ull << 30);
  REQUIRE(parse_device_spec("stripe:3", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::stripe);
  CHECK(ds.stripe_children == 3);
}

TEST_CASE("device strings: each error names the part that is wrong") {
  CHECK(contains(parse_error(""), "empty device string"));
  CHECK(contains(parse_error("emu:"), "no path"));
  CHECK(contains(parse_error("nvme:,sqpoll"), "no path"));
  CHECK(contains(parse_error("zns:/dev/x"), "unknown kind 'zns:'"));
  CHECK(contains(parse_error("emu:/x,lba=1000"), "lba=1000: expected lba=512 or lba=4096"));
  CHECK(contains(parse_error("emu:/x,lba="), "lba=: expected"));
  CHECK(contains(parse_error("emu:/x,mdts=11"), "mdts=11: expected mdts=0..10"));
  CHECK(contains(parse_error("emu:/x,mdts=-1"), "mdts=-1"));
  CHECK(contains(parse_error("emu:/x,size=12Q"), "size=12Q: expected size=N"));
  CHECK(contains(parse_error("emu:/x,size=0"), "size=0"));
  CHECK(contains(parse_error("emu:/x,vwc=1"), "vwc=1: expected vwc, vwc=SIZE (the write cache, 1M..4G) or vwc=through"));
  CHECK(contains(parse_error("emu:/x,vwc=8G"), "vwc=8G: expected"));
  CHECK(contains(parse_error("emu:/x,vwc=back"), "vwc=back: expected"));
  CHECK(contains(parse_error("emu:/x,sqpoll"), "sqpoll: unknown option (emu: takes"));
  CHECK(contains(parse_error("nvme:/dev/ng0n1,lba=4096"), "lba=4096: unknown option (nvme: takes"));
  CHECK(contains(parse_error("nvme:/dev/ng0n1,fixedbufs=yes"), "fixedbufs=yes: takes no value"));
  CHECK(contains(parse_error("emu:/x,,vwc"), "device 'emu:/x,,vwc': : unknown option"));
  CHECK(contains(parse_error("null:12X"), "null:12X"));
  CHECK(contains(parse_error("stripe:0"), "expected stripe:N with N in 1..16"));
  CHECK(contains(parse_error("stripe:17"), "stripe:17"));
  CHECK(contains(parse_error("emu:/x,vwc,"), "unknown option"));
  CHECK(contains(parse_error("emu:/x,lba"), "lba: needs a value"));
  CHECK(contains(parse_error("emu:/x,inline=yes"), "inline=yes: expected inline=on, off or auto"));
  CHECK(contains(parse_error("emu:/x,inline"), "inline: needs a value"));
}

TEST_CASE("open_device: missing and unusable backing files") {
  TempPath tmp("open");
  CHECK(contains(open_error("emu:" + tmp.path), "no such file (add ,size=SIZE to create it)"));
  CHECK(contains(open_error(tmp.path), "emu:" + tmp.path + ": no such file"));
  {
    const int fd = open(tmp.path.c_str(), O_CREAT | O_RDWR, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 1000) == 0);
    close(fd);
  }
  CHECK(contains(open_error("emu:" + tmp.path + ",lba=4096"), "1000 bytes is less than one 4096-byte block"));
  CHECK(contains(open_error("emu:/proc/self"), "emu:/proc/self: a directory, not a regular file or a block device"));
  CHECK(contains(open_error("emu:/dev/null"), "not a regular file or a block device"));
  CHECK(contains(open_error("emu:" + tmp.path + ",lba=7"), "lba=7"));
  // The kinds a caller may choose an exit status by.
  CHECK(open_code("emu:" + tmp.path + "-missing") == Status::Code::not_found);
  CHECK(open_code("emu:/proc/self") == Status::Code::invalid_argument);
  CHECK(open_code("emu:" + tmp.path + ",lba=7") == Status::Code::invalid_argument);
  CHECK(open_code("stripe:null+emu:" + tmp.path + "-missing") == Status::Code::not_found);
  CHECK(contains(open_error("stripe:null+emu:" + tmp.path + "-missing"), "emu:" + tmp.path + "-missing: no such file"));
  // size= creates a missing file, and leaves an existing one as it is.
  TempPath made("made");
  auto dev = open_test_device("emu:" + made.path + ",size=1M", DeviceOptions{});
  CHECK(dev->bdev()->capacity == 2048);
  dev.reset();
  dev = open_test_device("emu:" + made.path + ",size=4M", DeviceOptions{});
  CHECK(dev->bdev()->capacity == 2048);
}

TEST_CASE("open_device: a queue setting the block layer refuses is an error line, not an exception") {
  DeviceOptions o;
  o.qd = 0;
  std::unique_ptr<Device> dev;
  Status s;
  CHECK_NOTHROW(s = open_device("null", o, &dev));
  CHECK(s.code() == Status::Code::invalid_argument);
  CHECK(contains(s.message(), "qd=0: expected 1..65536"));
  CHECK_FALSE(dev);
}

TEST_CASE("open_device: passthrough error paths that need no NVMe device") {
  CHECK(contains(open_error("nvme:/dev/ng-biofs-missing0n1"), "nvme:/dev/ng-biofs-missing0n1: no such device"));
  CHECK(open_code("nvme:/dev/ng-biofs-missing0n1") == Status::Code::not_found);
  CHECK(open_code("nvme:/dev/null") == Status::Code::invalid_argument);
  TempPath tmp("notchr");
  {
    const int fd = open(tmp.path.c_str(), O_CREAT | O_RDWR, 0644);
    close(fd);
  }
  CHECK(contains(open_error("nvme:" + tmp.path), "not an NVMe generic char device (/dev/ngXnY)"));
  CHECK(contains(open_error("nvme:/dev/null"), "nvme:/dev/null: not an NVMe namespace (NVME_IOCTL_ID"));
  struct stat st;
  for (const char* blk : {"/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"}) {
    if (stat(blk, &st) == 0 && S_ISBLK(st.st_mode)) {
      CHECK(contains(open_error(std::string("nvme:") + blk), "a block device; passthrough needs the generic char device"));
      break;
    }
  }
}

TEST_CASE("open_device: a stripe is a bio-based target over null devices") {
  DeviceOptions o;
  o.queues = 2;
  auto dev = open_test_device("stripe:3", o);
  REQUIRE(dev->stripe());
  CHECK(dev->queue() == nullptr);
  CHECK(dev->queues().size() == 3);
  CHECK(dev->queues()[0]->nr_hw_queues() == 2);
  CHECK(dev->bdev()->capacity == 3 * dev->null_blk()->bdev()->capacity);
  // The bio sets a bio_cache toggle reaches inside the device: the stripe's clones'.
  CHECK(dev->bio_sets() == std::vector<BioSet*>{&dev->stripe()->clone_set()});
}

TEST_CASE("open_device: null devices come from blockcore's null_blk") {
  DeviceOptions o;
  o.queues = 2;
  o.qd = 64;
  auto dev = open_test_device("null:1G", o);
  REQUIRE(dev->null_blk());
  CHECK(dev->nvme() == nullptr);
  CHECK(dev->bdev()->capacity == (1ull << 30) / 512);
  CHECK(dev->queue()->nr_hw_queues() == 2);
  CHECK(dev->poll() == 0);
  CHECK(dev->bio_sets().empty());  // no bio set of its own: a null device clones nothing
}

TEST_CASE("open_device: ram:SIZE is blockcore's RAM disk, keeping what is written") {
  DeviceSpec ds;
  REQUIRE(parse_device_spec("ram:64M", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::ram);
  CHECK(ds.ram_bytes == (64u << 20));
  CHECK(contains(parse_error("ram:"), "expected ram:SIZE"));
  CHECK(contains(parse_error("ram:12X"), "ram:12X"));
  CHECK(contains(parse_error("ram:4K"), "at least 1M"));
  CHECK(contains(parse_error("tape:/dev/st0"), "stripe: or ram:"));

  auto dev = open_test_device("ram:16M", DeviceOptions{});
  REQUIRE(dev->ram());
  CHECK(dev->queue() == dev->ram()->queue());
  CHECK(dev->queues().size() == 1);
  CHECK(dev->bdev()->capacity == (16u << 20) >> SECTOR_SHIFT);
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  // Aligned buffers: the queue refuses data below its dma_alignment (512), as the kernel does.
  alignas(4096) static uint8_t w[4096], r[4096];
  fill_pattern(w, sizeof(w), 3);
  IoWait a, b;
  submit_bio(make_bio_on(dev->bdev(), bs, REQ_OP_WRITE, 64, w, 4096, &a));
  REQUIRE(a.done.load() == 1);  // brd completes inline
  CHECK(a.status.load() == BLK_STS_OK);
  submit_bio(make_bio_on(dev->bdev(), bs, REQ_OP_READ, 64, r, 4096, &b));
  REQUIRE(b.done.load() == 1);
  CHECK(b.status.load() == BLK_STS_OK);
  CHECK(std::memcmp(w, r, 4096) == 0);
}

TEST_CASE("open_device: stripe:DEV+DEV stripes over the devices named, each with its own options and limits") {
  DeviceSpec ds;
  REQUIRE(parse_device_spec("stripe:emu:/tmp/a.img,lba=4096+null:1G+ram:8M", &ds).ok());
  CHECK(ds.kind == DeviceSpec::Kind::stripe);
  CHECK(ds.stripe_children == 0);
  CHECK(ds.stripe_members == std::vector<std::string>{"emu:/tmp/a.img,lba=4096", "null:1G", "ram:8M"});
  CHECK(contains(parse_error("stripe:null:1G++null:1G"), "an empty member"));
  CHECK(contains(parse_error("stripe:null:1G+"), "an empty member"));
  CHECK(contains(parse_error("stripe:null:1G+stripe:2"), "member 'stripe:2' is a stripe"));
  CHECK(contains(parse_error("stripe:null:1G+emu:/x,lba=1000"), "stripe:null:1G+emu:/x,lba=1000"));
  CHECK(contains(parse_error("stripe:null:1G+emu:/x,lba=1000"), "lba"));
  std::string seventeen = "stripe:null:1M";
  for (int i = 0; i < 16; i++) seventeen += "+null:1M";
  CHECK(contains(parse_error(seventeen), "17 members, at most 16"));

  // Two emulated namespaces with different LBA sizes and MDTS: every 128 KiB chunk lands on
  // the member the stripe maps it to, split there by that member's own limits.
  TempPath a("stripe-a"), b("stripe-b");
  DeviceOptions o;
  o.stripe_chunk_sectors = 256;
  auto dev = open_test_device("stripe:emu:" + a.path + ",size=8M,mdts=1+emu:" + b.path + ",size=8M,lba=4096", o);
  REQUIRE(dev->stripe());
  REQUIRE(dev->members().size() == 2);
  CHECK(dev->queues().size() == 2);
  CHECK(dev->bdev()->capacity == 2 * ((8u << 20) >> SECTOR_SHIFT));
  CHECK(dev->members()[0]->queue()->limits().max_hw_sectors == 16);  // 4 KiB << 1
  CHECK(dev->members()[1]->queue()->limits().logical_block_size == 4096);
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  std::vector<uint8_t> out(1 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); i++) out[i] = uint8_t(i * 7 + (i >> 12));
  REQUIRE(sync_io(*dev, bs, REQ_OP_WRITE, 0, out.data(), uint32_t(out.size())) == BLK_STS_OK);
  REQUIRE(sync_io(*dev, bs, REQ_OP_FLUSH | REQ_PREFLUSH, 0, nullptr, 0) == BLK_STS_OK);
  REQUIRE(sync_io(*dev, bs, REQ_OP_READ, 0, in.data(), uint32_t(in.size())) == BLK_STS_OK);
  CHECK(in == out);
  CHECK(dev->stripe()->clones() >= 8 + 1);  // eight chunks, and the flush to each member
  // Chunk 2k is member a's chunk k, chunk 2k+1 member b's: read the members' files.
  const size_t chunk = 128 << 10;
  for (const auto& [path, first] : {std::pair{a.path, size_t(0)}, std::pair{b.path, size_t(1)}}) {
    const int fd = open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    std::vector<uint8_t> got(chunk);
    for (size_t k = 0; k < 4; k++) {
      REQUIRE(pread(fd, got.data(), chunk, off_t(k * chunk)) == ssize_t(chunk));
      CHECK(std::memcmp(got.data(), out.data() + (2 * k + first) * chunk, chunk) == 0);
    }
    close(fd);
  }
  const IoContract c = io_contract(*dev, o);
  CHECK(contains(c.device, "striped target over 2 devices"));
  REQUIRE(c.members.size() == 2);
  CHECK(c.lba_size == 4096);
  CHECK(c.members[0].limits.max_hw_sectors == 16);
  const std::vector<std::string> lines = io_contract_lines(c);
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("member 2: ", 0) == 0; }) == 2);
}
