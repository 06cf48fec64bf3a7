// The harness bodies (fuzz_targets.h has the input formats) and their seeds.
#include "fuzz_targets.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "fs/format.h"
#include "daemon/mount_options.h"
#include "fuzz_image.h"
#include "devices/open_device.h"

namespace biofs::fuzz {

using namespace disk;

namespace {

constexpr uint8_t FIX = 1, CRASHED = 2, ALSO_BACKUP = 4, SHORT_DEVICE = 8;

const Image& image_for(uint8_t flags) { return (flags & CRASHED) ? crash_image() : clean_image(); }

// Overlays `data` on `len` bytes at `off` (as much of it as the input has).
void overlay(std::vector<uint8_t>& img, uint64_t off, uint64_t len, const uint8_t* data, size_t size) {
  std::memcpy(img.data() + off, data, std::min<uint64_t>(len, size));
}

// Whether a superblock check_superblock() accepted keeps every region inside the device.
void check_accepted_layout(const SuperBlock& sb, uint64_t device_bytes) {
  using u128 = unsigned __int128;
  const u128 bs = sb.block_size, bpb = bitmap_bits_per_block(sb.block_size), ipb = bs / INODE_SIZE;
  const bool fits = u128(sb.block_count) * bs <= device_bytes && sb.data_start < sb.block_count &&
                    u128(sb.block_bitmap_blocks) * bpb >= sb.block_count &&
                    u128(sb.inode_bitmap_blocks) * bpb >= sb.inode_count &&
                    u128(sb.inode_table_blocks) * ipb >= sb.inode_count &&
                    u128(sb.journal_start) + sb.journal_blocks <= sb.data_start;
  if (!fits)
    property_failed("check_superblock accepted a layout that does not fit: " + std::to_string(sb.block_count) +
                    " blocks, " + std::to_string(sb.inode_count) + " inodes, data from " + std::to_string(sb.data_start));
}

// As the parsers print their input: control characters as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  char hex[8];
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
    } else {
      snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// Control characters in a message would let an input forge extra lines of output.
void one_printable_line(const std::string& msg, const std::string& what) {
  for (char c : msg)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) property_failed(what + " holds a control character: " + msg);
}

}  // namespace

int fuzz_superblock(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::vector<uint8_t> img = image_for(flags).bytes;
  overlay(img, 0, sizeof(SuperBlock), data + 1, size - 1);
  SuperBlock sb;
  std::memcpy(&sb, img.data(), sizeof sb);
  if (flags & FIX) sb.checksum = superblock_crc(sb);
  std::memcpy(img.data(), &sb, sizeof sb);
  if ((flags & ALSO_BACKUP) && sb.block_size >= MIN_BLOCK_SIZE && sb.block_size <= MAX_BLOCK_SIZE)
    std::memcpy(img.data() + img.size() - sb.block_size, &sb, sizeof sb);
  if (flags & SHORT_DEVICE) img.resize(img.size() / 2);
  const std::string why = check_superblock(sb, img.size());
  one_printable_line(why, "a superblock complaint");
  if (why.empty()) check_accepted_layout(sb, img.size());
  exercise_image(img);
  return 0;
}

int fuzz_inode(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Image& base = image_for(data[1]);
  const uint64_t ino = base.used_inodes[data[0] % base.used_inodes.size()];
  std::vector<uint8_t> img = base.bytes;
  const uint64_t ipb = base.sb.block_size / INODE_SIZE;
  const uint64_t off = (base.sb.inode_table_start + (ino - 1) / ipb) * base.sb.block_size + (ino - 1) % ipb * INODE_SIZE;
  overlay(img, off, INODE_SIZE, data + 2, size - 2);
  if (data[1] & FIX) {
    Inode in;
    std::memcpy(&in, img.data() + off, INODE_SIZE);
    in.checksum = inode_crc(ino, in);
    std::memcpy(img.data() + off, &in, INODE_SIZE);
  }
  exercise_image(img);
  return 0;
}

// A headered block of the image replaced by the input (its crc fixed on request).
static int fuzz_block(std::vector<uint64_t> Image::*which, const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Image& base = image_for(data[1]);
  const auto& blocks = base.*which;
  const uint64_t blk = blocks[data[0] % blocks.size()];
  const uint32_t bs = base.sb.block_size;
  std::vector<uint8_t> img = base.bytes;
  overlay(img, blk * bs, bs, data + 2, size - 2);
  if (data[1] & FIX) set_block_crc(img.data() + blk * bs, bs);
  exercise_image(img);
  return 0;
}

int fuzz_extent(const uint8_t* data, size_t size) { return fuzz_block(&Image::tree_blocks, data, size); }
int fuzz_dir(const uint8_t* data, size_t size) { return fuzz_block(&Image::dir_blocks, data, size); }
int fuzz_xattr(const uint8_t* data, size_t size) { return fuzz_block(&Image::xattr_blocks, data, size); }

int fuzz_journal(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The crashed image unless told otherwise: its journal has something to replay.
  const Image& base = (data[0] & CRASHED) ? clean_image() : crash_image();
  std::vector<uint8_t> img = base.bytes;
  const uint64_t bs = base.sb.block_size;
  apply_patches(img, data + 1, size - 1, 2, base.sb.journal_start * bs, base.sb.data_start * bs);
  if (data[0] & FIX) fix_checksums(img, false);
  exercise_image(img);
  return 0;
}

int fuzz_image(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<uint8_t> img = image_for(data[0]).bytes;
  apply_patches(img, data + 1, size - 1, 3, 0, img.size());
  if (data[0] & FIX) fix_checksums(img, false);
  exercise_image(img);
  return 0;
}

int fuzz_mount_options(const uint8_t* data, size_t size) {
  const std::string list(reinterpret_cast<const char*>(data), size);
  DaemonOptions o;
  const Status s = parse_mount_options(list, &o);
  if (s.ok()) return 0;
  const std::string& msg = s.message();
  one_printable_line(msg, "a mount option error");
  // It names the option at fault: some option of the list (its name at least) is in it, the
  // list split as libfuse's fuse_opt splits it: "\\," is a comma inside an option, "\\NNN" an
  // octal byte, "\\x" is x, and an option ends at a NUL.
  std::vector<std::string> opts(1);
  for (size_t i = 0; i < list.size(); i++) {
    const char c = list[i];
    if (c == '\\' && i + 1 < list.size()) {
      const char* e = list.c_str() + i + 1;
      if (e[0] >= '0' && e[0] <= '3' && e[1] >= '0' && e[1] <= '7' && e[2] >= '0' && e[2] <= '7') {
        opts.back() += char((e[0] - '0') * 64 + (e[1] - '0') * 8 + (e[2] - '0'));
        i += 3;
      } else {
        opts.back() += list[++i];
      }
    } else if (c == ',') {
      opts.emplace_back();
    } else {
      opts.back() += c;
    }
  }
  for (std::string& opt : opts) opt = opt.substr(0, opt.find('\0'));
  for (const std::string& opt : opts)
    if (!opt.empty() && msg.find(printable(opt.substr(0, opt.find('=')))) != std::string::npos) return 0;
  if (list.find('\0') != std::string::npos && msg.find("control character") != std::string::npos) return 0;
  property_failed("a mount option error names no option of '" + list + "': " + msg);
}

// stripe:N holds 1..16 children; stripe:DEV+DEV 2..16 members, none of them a stripe.
static bool stripe_well_formed(const DeviceSpec& ds) {
  if (ds.stripe_members.empty()) return ds.stripe_children >= 1 && ds.stripe_children <= 16;
  if (ds.stripe_children != 0 || ds.stripe_members.size() < 2 || ds.stripe_members.size() > 16) return false;
  for (const std::string& m : ds.stripe_members)
    if (m.empty() || m.rfind("stripe:", 0) == 0) return false;
  return true;
}

int fuzz_device_spec(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  DeviceSpec ds;
  const Status s = parse_device_spec(spec, &ds);
  if (s.ok()) {
    const bool empty = ds.kind == DeviceSpec::Kind::null     ? ds.null_blk.size_bytes == 0
                       : ds.kind == DeviceSpec::Kind::stripe ? !stripe_well_formed(ds)
                       : ds.kind == DeviceSpec::Kind::ram    ? ds.ram_bytes < (1u << 20)
                                                             : ds.emu.path.empty();
    if (empty)
      property_failed("device string '" + spec + "' parsed to an empty device");
    return 0;
  }
  const std::string& err = s.message();
  if (err.empty()) property_failed("device string '" + spec + "' refused without a message");
  one_printable_line(err, "a device string error");
  // It names the string (or says it is empty).
  if (!spec.empty() && err.find(printable(spec)) == std::string::npos)
    property_failed("a device string error does not name '" + spec + "': " + err);
  return 0;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"superblock", fuzz_superblock}, {"inode", fuzz_inode},       {"extent", fuzz_extent},
      {"dir", fuzz_dir},               {"xattr", fuzz_xattr},       {"journal", fuzz_journal},
      {"image", fuzz_image},           {"mount_options", fuzz_mount_options},
      {"device_spec", fuzz_device_spec}};
  return t;
}

std::vector<std::vector<uint8_t>> seeds(const std::string& target) {
  std::vector<std::vector<uint8_t>> out;
  auto bytes = [](std::initializer_list<uint8_t> head, const uint8_t* p, size_t n) {
    std::vector<uint8_t> v(head);
    v.insert(v.end(), p, p + n);
    return v;
  };
  const Image* imgs[2] = {&clean_image(), &crash_image()};
  if (target == "superblock") {
    for (uint8_t f : {FIX, uint8_t(FIX | CRASHED), uint8_t(FIX | ALSO_BACKUP), uint8_t(FIX | SHORT_DEVICE), uint8_t(0)})
      out.push_back(bytes({f}, image_for(f).bytes.data(), sizeof(SuperBlock)));
  } else if (target == "inode") {
    for (int c = 0; c < 2; c++) {
      const Image& im = *imgs[c];
      const uint64_t ipb = im.sb.block_size / INODE_SIZE;
      for (size_t i = 0; i < im.used_inodes.size(); i++) {
        const uint64_t ino = im.used_inodes[i];
        const uint64_t off = (im.sb.inode_table_start + (ino - 1) / ipb) * im.sb.block_size + (ino - 1) % ipb * INODE_SIZE;
        out.push_back(bytes({uint8_t(i), uint8_t(FIX | (c ? CRASHED : 0))}, im.bytes.data() + off, INODE_SIZE));
      }
    }
  } else if (target == "extent" || target == "dir" || target == "xattr") {
    const Image& im = clean_image();
    const auto& blocks = target == "extent" ? im.tree_blocks : target == "dir" ? im.dir_blocks : im.xattr_blocks;
    for (size_t i = 0; i < blocks.size(); i++)
      out.push_back(bytes({uint8_t(i), FIX}, im.bytes.data() + blocks[i] * im.sb.block_size, im.sb.block_size));
    if (target == "xattr") {  // the same block with its first entry's value length past `used`
      std::vector<uint8_t> v = out.back();
      v[2 + sizeof(XattrBlock) + 3] = 0xff;
      out.push_back(v);
    }
  } else if (target == "journal") {
    out.push_back({FIX});
    out.push_back({uint8_t(FIX | CRASHED)});
    // The first descriptor's first target, and the commit's block count, touched.
    const uint32_t bs = crash_image().sb.block_size;
    const uint16_t target_off = uint16_t(bs + sizeof(JournalDesc));
    out.push_back({FIX, uint8_t(target_off), uint8_t(target_off >> 8), 1, 0});
    out.push_back({0, uint8_t(bs), uint8_t(bs >> 8), 4, 'B', 'J', 'D', 'C'});
  } else if (target == "image") {
    out.push_back({FIX});
    out.push_back({uint8_t(FIX | CRASHED)});
    out.push_back({FIX, 0, 0x10, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  } else if (target == "mount_options") {
    for (const char* s : {"bio_cache=off,tag_batch=retain,split_check=fast", "queues=2,qd=64,commit=0",
                          "meta_cache=16,writeback_cache,ro", "allow_other,default_permissions,fsname=x,noatime",
                          "bio_cache=maybe", "frobnicate", "qd=0", ",,"})
      out.emplace_back(s, s + strlen(s));
  } else if (target == "device_spec") {
    for (const char* s : {"emu:/tmp/x.img,lba=4096,mdts=5,vwc,buffered,size=4G", "/tmp/plain.img",
                          "nvme:/dev/ng0n1,regfiles,fixedbufs,iopoll,sqpoll", "null", "null:1G", "emu:",
                          "emu:/x,lba=1024", "foo:bar", "null:12Q", "stripe:2", "stripe:a.img+null:1G",
                          "stripe:emu:/a,lba=4096+emu:/b+ram:64M", "stripe:a++b"})
      out.emplace_back(s, s + strlen(s));
  }
  return out;
}

}  // namespace biofs::fuzz
