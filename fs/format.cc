#include "format.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "block_io.h"
#include "crc32c.h"
#include "io_batch.h"
#include "io_buf.h"

namespace biofs::disk {

uint32_t superblock_crc(const SuperBlock& sb) { return crc32c(0, &sb, offsetof(SuperBlock, checksum)); }

uint32_t inode_crc(uint64_t ino, const Inode& in) {
  return crc32c(crc32c(0, &ino, sizeof(ino)), &in, offsetof(Inode, checksum));
}

void set_block_crc(void* block, uint32_t block_size) {
  auto* h = static_cast<BlockHeader*>(block);
  h->crc = 0;
  h->crc = crc32c(0, block, block_size);
}

bool block_crc_ok(const void* block, uint32_t block_size) {
  const auto* h = static_cast<const BlockHeader*>(block);
  const uint32_t want = h->crc;
  // Checksum as if the field were zero, without writing to the caller's block.
  uint32_t c = crc32c(0, block, offsetof(BlockHeader, crc));
  const uint32_t zero = 0;
  c = crc32c(c, &zero, 4);
  c = crc32c(c, static_cast<const uint8_t*>(block) + 8, block_size - 8);
  return c == want;
}

bool block_header_ok(const void* block, uint32_t block_size, uint32_t magic, uint64_t blocknr) {
  const auto* h = static_cast<const BlockHeader*>(block);
  return h->magic == magic && h->blocknr == blocknr && block_crc_ok(block, block_size);
}

uint32_t dir_hash(uint32_t seed, const char* name, size_t len) { return crc32c(seed, name, len); }

bool dir_record_fits(const void* block, uint32_t block_size, uint32_t off) {
  if (uint64_t(off) + sizeof(DirEntry) > block_size) return false;
  uint16_t rec_len;
  std::memcpy(&rec_len, static_cast<const uint8_t*>(block) + off + offsetof(DirEntry, rec_len), sizeof(rec_len));
  return rec_len >= sizeof(DirEntry) && rec_len % 8 == 0 && uint64_t(off) + rec_len <= block_size;
}

bool extent_node_ok(const ExtentNode& n, uint64_t owner, uint32_t block_size, bool root) {
  return n.owner == owner && n.nr <= extents_per_node(block_size) &&
         (root ? n.level <= MAX_EXTENT_DEPTH : n.level < MAX_EXTENT_DEPTH);
}

std::string check_superblock(const SuperBlock& sb, uint64_t device_bytes) {
  if (sb.magic != SB_MAGIC) return "not a biofs filesystem (bad magic)";
  if (superblock_crc(sb) != sb.checksum) return "superblock checksum mismatch";
  if (sb.version != VERSION) return "unsupported format version " + std::to_string(sb.version);
  if (sb.sb_size != sizeof(SuperBlock)) return "superblock size " + std::to_string(sb.sb_size) + " is not 512";
  if (sb.feature_incompat & ~FEATURE_INCOMPAT_KNOWN) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%x", unsigned(sb.feature_incompat & ~FEATURE_INCOMPAT_KNOWN));
    return std::string("unknown incompatible features 0x") + hex;
  }
  if (sb.block_size < MIN_BLOCK_SIZE || sb.block_size > MAX_BLOCK_SIZE || (sb.block_size & (sb.block_size - 1)))
    return "bad block size " + std::to_string(sb.block_size);
  if (sb.inode_size != INODE_SIZE) return "bad inode size " + std::to_string(sb.inode_size);
  const uint64_t bs = sb.block_size;
  if (device_bytes && sb.block_count > device_bytes / bs)
    return "device is " + std::to_string(device_bytes) + " bytes but the superblock says " +
           std::to_string(sb.block_count * bs) + " (truncated image?)";
  // The regions must be in order and inside the filesystem. The counts are bounded first, so
  // the sizes below cannot wrap (2^64 - 1 inodes would need 0 bitmap and table blocks).
  const uint64_t bpb = bitmap_bits_per_block(sb.block_size);
  const uint64_t ipb = bs / INODE_SIZE;
  if (sb.block_count > (uint64_t(1) << 48) || sb.inode_count / ipb > sb.block_count ||
      sb.journal_blocks > sb.block_count)
    return "superblock layout is inconsistent";
  bool ok = sb.block_bitmap_start == 1 &&
            sb.block_bitmap_blocks == (sb.block_count + bpb - 1) / bpb &&
            sb.inode_bitmap_start == sb.block_bitmap_start + sb.block_bitmap_blocks &&
            sb.inode_bitmap_blocks == (sb.inode_count + bpb - 1) / bpb &&
            sb.inode_table_start == sb.inode_bitmap_start + sb.inode_bitmap_blocks &&
            sb.inode_table_blocks == (sb.inode_count + ipb - 1) / ipb &&
            sb.journal_start == sb.inode_table_start + sb.inode_table_blocks &&
            sb.data_start == sb.journal_start + sb.journal_blocks &&
            sb.data_start < sb.block_count && sb.backup_sb_block == sb.block_count - 1 &&
            sb.root_ino == ROOT_INO && sb.inode_count >= 1 && sb.journal_blocks >= 4;
  if (!ok) return "superblock layout is inconsistent";
  return "";
}

bool backup_superblock_ok(const SuperBlock& backup, const SuperBlock& primary, uint64_t device_bytes) {
  return check_superblock(backup, device_bytes).empty() && std::memcmp(backup.uuid, primary.uuid, 16) == 0;
}

void make_journal_super(void* block, const SuperBlock& sb, uint64_t sequence) {
  auto* j = static_cast<JournalSuper*>(block);
  j->h.magic = BLK_JOURNAL_SB;
  j->h.blocknr = sb.journal_start;
  j->sequence = sequence;
  j->head = 1;
  j->block_size = sb.block_size;
  std::memcpy(j->uuid, sb.uuid, 16);
  set_block_crc(block, sb.block_size);
}

uint64_t fresh_journal_sequence() {
  std::random_device rd;
  return (uint64_t(rd()) << 32 | rd()) >> 2;
}

std::vector<std::string> check_journal_super(const void* block, const SuperBlock& sb) {
  const auto* j = static_cast<const JournalSuper*>(block);
  if (!block_header_ok(block, sb.block_size, BLK_JOURNAL_SB, sb.journal_start))
    return {"journal superblock (block " + std::to_string(sb.journal_start) + ") fails its checksum or header check"};
  std::vector<std::string> problems;
  if (std::memcmp(j->uuid, sb.uuid, 16) != 0) problems.push_back("journal belongs to another filesystem");
  if (j->head < 1 || j->head >= sb.journal_blocks) problems.push_back("journal head out of range");
  return problems;
}

std::string read_superblock(BlockIo& io, SuperBlock* sb, bool use_backup) {
  if (io.device_bytes() < 4096) return "device too small: " + std::to_string(io.device_bytes()) + " bytes";
  IoBuf buf(4096);
  IoBatch b(&io);
  b.rw_bytes(false, 0, 4096, buf.data());
  if (int err = b.wait()) return std::string("cannot read the superblock: ") + strerror(-err);
  std::memcpy(sb, buf.data(), sizeof(*sb));
  std::string why = check_superblock(*sb, io.device_bytes());
  if (why.empty() || !use_backup || sb->magic != SB_MAGIC || why.find("truncated") != std::string::npos)
    return why;
  // The primary is damaged: try the backup at the end of the device for each legal block size.
  return find_backup_superblock(io, sb) ? "" : why;
}

bool find_backup_superblock(BlockIo& io, SuperBlock* sb) {
  for (uint32_t bs = MIN_BLOCK_SIZE; bs <= MAX_BLOCK_SIZE; bs <<= 1) {
    if (io.device_bytes() < 2 * uint64_t(bs)) break;  // no room for a primary and a backup
    const uint64_t blk = io.device_bytes() / bs - 1;
    IoBuf bb(bs);
    IoBatch r(&io);
    r.rw_bytes(false, blk * bs, bs, bb.data());
    if (r.wait()) continue;
    SuperBlock backup;
    std::memcpy(&backup, bb.data(), sizeof(backup));
    if (check_superblock(backup, io.device_bytes()).empty() && backup.block_size == bs) {
      *sb = backup;
      return true;
    }
  }
  return false;
}

}  // namespace biofs::disk
