// Images for the fuzz harnesses: a small filesystem made by mkfs and a short workload, in
// memory, byte-for-byte the same on every run (so a crashing input reproduces anywhere), and the
// checksum fixer that lets mutated metadata get past its crc to the parsers behind it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "blockcore/brd.h"
#include "fs/block_io.h"
#include "fs/format.h"

namespace biofs::fuzz {

struct Image {
  std::vector<uint8_t> bytes;  // the whole device
  disk::SuperBlock sb{};
  // Where the harnesses aim (inode numbers and blocks in this image).
  std::vector<uint64_t> used_inodes;  // every inode in use
  uint64_t frag_ino = 0;              // a file with a two-level extent tree
  std::vector<uint64_t> tree_blocks;  // its tree blocks, root first
  std::vector<uint64_t> dir_blocks;   // every directory block
  uint64_t subdir_ino = 0;            // a directory of two blocks
  std::vector<uint64_t> xattr_blocks; // external xattr blocks (file "a" has one)
};

inline constexpr uint64_t IMAGE_BYTES = 1 << 20;  // 1 MiB, 1 KiB blocks
inline constexpr uint32_t IMAGE_BLOCK = 1024;

// Makes one of the two images below (each call builds it again: the tests compare two).
Image make_image(bool crash);
// The filesystem after mkfs and the workload, cleanly unmounted.
const Image& clean_image();
// The same filesystem mounted again, changed, and crashed after a commit block reached the
// disk but before its checkpoint: the journal holds a transaction to replay, and the orphan
// list an inode unlinked while open.
const Image& crash_image();

// Recomputes every checksum the superblock's layout lets us find: superblock and backup,
// inodes in use, headered blocks in place, and the journal's descriptors, copies and commit
// data crcs. `canonical` also clears what differs between runs (times, uuid, hash seed, the
// journal's random sequence numbers, stale journal blocks), which is how the images are made
// reproducible. Tolerates any bytes: a nonsensical superblock only gets its own crc fixed.
void fix_checksums(std::vector<uint8_t>& img, bool canonical);

// A RAM disk holding `img`.
std::unique_ptr<BrdDevice> load_device(const std::vector<uint8_t>& img);

// Applies patches from a fuzz input to `img`: records of [offset: `off_bytes` little-endian]
// [length: 1 byte][bytes], offsets taken modulo [lo, hi); a record cut short writes what it has.
void apply_patches(std::vector<uint8_t>& img, const uint8_t* data, size_t size, unsigned off_bytes,
                   uint64_t lo, uint64_t hi);

// What a mutated image did to fsck and to a mount.
struct Outcome {
  int fsck_status = -1;       // as fsck.biofs -n would exit: 0 clean, 4 errors, 8 cannot check
  std::string mount_error;    // "" when it mounted
  int unmount_status = 0;     // 0 or -errno
  uint64_t walked = 0;        // entries seen walking the tree
  int fsck_after = -1;        // fsck again after the unmount (-1: it did not mount)
};

// Checks the image with fsck (in-process), then mounts it, walks the whole tree (attributes,
// file data, symlinks, xattrs), changes a few things, unmounts and checks again. Aborts with a
// message when a property breaks: an error that is not one line, a mount that succeeded with a
// root that is not a directory, an fsck status outside 0/4/8.
Outcome exercise_image(const std::vector<uint8_t>& img, bool change = true);

// Called with every image exercise_image() is given, before it starts (the fsck corpus test
// collects the harnesses' damaged images this way); an empty function removes it.
void set_image_observer(std::function<void(const std::vector<uint8_t>&)> observer);

// Aborts the process with "fuzz property failed: WHAT": a finding as much as a crash is.
[[noreturn]] void property_failed(const std::string& what);

}  // namespace biofs::fuzz
