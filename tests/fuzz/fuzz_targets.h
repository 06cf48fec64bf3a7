// The fuzz harness bodies, one per parser. libFuzzer calls them through fuzz_main.cc (one
// binary each, built with BIOFS_FUZZ=ON); the ordinary build's tests call them on the seed
// corpus and on the committed regression inputs. Each returns 0 and aborts with a message
// (property_failed) when an input breaks a rule; a crash is the other kind of finding.
//
// Input formats (byte 0 is a flags byte for the image harnesses: bit 0 fixes checksums after
// the mutation, so the bytes reach the parser behind the crc; bit 1 starts from the crashed
// image, whose journal holds a transaction to replay):
//   superblock  [flags][superblock bytes, up to 512] over block 0 (bit 2: also the backup,
//               bit 3: a device half the size the superblock expects)
//   inode       [which inode in use][flags][inode bytes, up to 256] over its table slot
//   extent      [which tree block][flags][block bytes] over a two-level extent tree's block
//   dir         [which directory block][flags][block bytes] over that block
//   xattr       [which xattr block][flags][block bytes] over an external xattr block
//   journal     [flags][patches: 2-byte offset, 1-byte length, bytes] within the journal (here
//               bit 1 starts from the clean image: the crashed one is the default)
//   image       [flags][patches: 3-byte offset, 1-byte length, bytes] anywhere in the image
//   mount_options  the -o string        device_spec  the device string
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace biofs::fuzz {

int fuzz_superblock(const uint8_t* data, size_t size);
int fuzz_inode(const uint8_t* data, size_t size);
int fuzz_extent(const uint8_t* data, size_t size);
int fuzz_dir(const uint8_t* data, size_t size);
int fuzz_xattr(const uint8_t* data, size_t size);
int fuzz_journal(const uint8_t* data, size_t size);
int fuzz_image(const uint8_t* data, size_t size);
int fuzz_mount_options(const uint8_t* data, size_t size);
int fuzz_device_spec(const uint8_t* data, size_t size);

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};
const std::vector<Target>& targets();

// The seed corpus of a harness, made from the fuzz images and a few strings.
std::vector<std::vector<uint8_t>> seeds(const std::string& target);

}  // namespace biofs::fuzz
