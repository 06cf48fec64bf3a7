#include "mkfs.h"

#include <uuid/uuid.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <random>

#include "crc32c.h"
#include "io_batch.h"
#include "io_buf.h"

namespace biofs {

using namespace disk;

Status mkfs_geometry(uint64_t device_bytes, const MkfsOptions& opts, SuperBlock* out) {
  const uint32_t bs = opts.block_size;
  if (bs < MIN_BLOCK_SIZE || bs > MAX_BLOCK_SIZE || (bs & (bs - 1)))
    return Status::invalid_argument("block size " + std::to_string(bs) + " is not a power of two from 1024 to 65536");
  if (opts.label.size() >= sizeof(SuperBlock::label))
    return Status::invalid_argument("label is longer than " + std::to_string(sizeof(SuperBlock::label) - 1) + " bytes");
  const uint64_t blocks = device_bytes / bs;
  uint64_t inodes = opts.inodes ? opts.inodes : std::max<uint64_t>(64, device_bytes / 16384);
  uint64_t jblocks = opts.journal_blocks
                         ? opts.journal_blocks
                         : std::clamp<uint64_t>(blocks / 64, 64, 16384);
  if (jblocks < 4)
    return Status::invalid_argument("journal of " + std::to_string(jblocks) + " blocks is too small (at least 4)");
  const uint64_t bpb = bitmap_bits_per_block(bs);
  const uint64_t ipb = bs / INODE_SIZE;
  SuperBlock sb{};
  sb.magic = SB_MAGIC;
  sb.version = VERSION;
  sb.sb_size = sizeof(SuperBlock);
  sb.feature_incompat = FEATURE_INCOMPAT_JOURNAL | FEATURE_INCOMPAT_EXTENT_TREE | FEATURE_INCOMPAT_INLINE_XATTR |
                        FEATURE_INCOMPAT_XATTR_BLOCK;
  sb.block_size = bs;
  sb.block_count = blocks;
  sb.inode_count = inodes;
  sb.block_bitmap_start = 1;
  sb.block_bitmap_blocks = (blocks + bpb - 1) / bpb;
  sb.inode_bitmap_start = sb.block_bitmap_start + sb.block_bitmap_blocks;
  sb.inode_bitmap_blocks = (inodes + bpb - 1) / bpb;
  sb.inode_table_start = sb.inode_bitmap_start + sb.inode_bitmap_blocks;
  sb.inode_table_blocks = (inodes + ipb - 1) / ipb;
  // A commit may have to log every block-bitmap block (freeing a file spread over the whole
  // device) beside its other blocks: the journal must hold that in one transaction.
  const uint64_t jmin = 2 * sb.block_bitmap_blocks + 32;
  if (jblocks < jmin) {
    if (opts.journal_blocks)
      return Status::invalid_argument("journal of " + std::to_string(jblocks) +
                                      " blocks is too small for this device (at least " + std::to_string(jmin) + ")");
    jblocks = jmin;
  }
  sb.journal_start = sb.inode_table_start + sb.inode_table_blocks;
  sb.journal_blocks = jblocks;
  sb.data_start = sb.journal_start + jblocks;
  sb.backup_sb_block = blocks ? blocks - 1 : 0;
  sb.root_ino = ROOT_INO;
  sb.inode_size = INODE_SIZE;
  sb.state = STATE_CLEAN;
  // At least 16 data blocks beside the metadata and the backup superblock.
  const uint64_t need = sb.data_start + 16 + 1;
  if (blocks < need)
    return Status::invalid_argument("device too small: " + std::to_string(device_bytes) +
                                    " bytes, this geometry needs at least " + std::to_string(need * bs) + " (" +
                                    std::to_string(inodes) + " inodes, " + std::to_string(jblocks) +
                                    " journal blocks)");
  sb.free_blocks = blocks - sb.data_start - 1;
  sb.free_inodes = inodes - 1;
  uuid_generate(sb.uuid);  // a random (version 4) UUID where the kernel's entropy allows, as mke2fs
  std::random_device rd;
  sb.hash_seed = rd();
  std::memcpy(sb.label, opts.label.data(), opts.label.size());
  sb.mkfs_time = sb.write_time = int64_t(time(nullptr));
  sb.checksum = superblock_crc(sb);
  *out = sb;
  return Status();
}

namespace {

// Bitmap block `i` of a bitmap with `total` meaningful bits: bits [used_lo, used_hi) in use, and
// every bit past `total` set so it is never handed out.
void make_bitmap_block(uint8_t* blk, uint32_t bs, uint32_t magic, uint64_t blocknr, uint64_t i,
                       uint64_t total, uint64_t used_hi, uint64_t extra_used) {
  std::memset(blk, 0, bs);
  auto* h = reinterpret_cast<BlockHeader*>(blk);
  h->magic = magic;
  h->blocknr = blocknr;
  uint8_t* bits = blk + sizeof(BlockHeader);
  const uint64_t bpb = bitmap_bits_per_block(bs);
  for (uint64_t bit = 0; bit < bpb; bit++) {
    const uint64_t n = i * bpb + bit;
    if (n < used_hi || n >= total || n == extra_used) bits[bit / 8] |= uint8_t(1u << (bit % 8));
  }
  set_block_crc(blk, bs);
}

}  // namespace

Status make_filesystem(BlockIo& io, const MkfsOptions& opts, SuperBlock* out) {
  SuperBlock old;
  if (io.device_bytes() >= 4096) {
    IoBuf buf(4096);
    IoBatch b(&io);
    b.rw_bytes(false, 0, 4096, buf.data());
    if (int err = b.wait()) return Status::io_error(std::string("cannot read the device: ") + strerror(-err));
    std::memcpy(&old, buf.data(), sizeof(old));
    if (old.magic == SB_MAGIC && !opts.force)
      return Status::invalid_argument("device already holds a biofs filesystem (use -f to overwrite it)");
  }
  SuperBlock sb;
  if (Status s = mkfs_geometry(io.device_bytes(), opts, &sb); !s.ok()) return s;
  const uint32_t bs = sb.block_size;
  io.set_block_size(bs);

  // Zero the inode table and the journal in 1 MiB writes, reporting progress.
  const uint64_t zero_from = sb.inode_table_start;
  const uint64_t zero_to = sb.data_start;
  const uint64_t chunk = std::max<uint64_t>(1, (1u << 20) / bs);
  IoBuf zeros(chunk * bs);
  for (uint64_t b = zero_from; b < zero_to;) {
    IoBatch batch(&io);
    for (int k = 0; k < 16 && b < zero_to; k++) {
      const uint64_t n = std::min(chunk, zero_to - b);
      batch.write(b, uint32_t(n), zeros.data());
      b += n;
    }
    if (int err = batch.wait()) return Status::io_error(std::string("write failed: ") + strerror(-err));
    if (opts.progress) opts.progress(b - zero_from, zero_to - zero_from);
  }

  IoBatch batch(&io);
  std::vector<IoBuf> bufs;
  // Block bitmap: the metadata region and the backup superblock are in use.
  for (uint64_t i = 0; i < sb.block_bitmap_blocks; i++) {
    bufs.emplace_back(bs);
    make_bitmap_block(bufs.back().data(), bs, BLK_BLOCK_BITMAP, sb.block_bitmap_start + i, i,
                      sb.block_count, sb.data_start, sb.backup_sb_block);
    batch.write(sb.block_bitmap_start + i, 1, bufs.back().data());
  }
  // Inode bitmap: bit n-1 is inode n; the root (1) is in use.
  for (uint64_t i = 0; i < sb.inode_bitmap_blocks; i++) {
    bufs.emplace_back(bs);
    make_bitmap_block(bufs.back().data(), bs, BLK_INODE_BITMAP, sb.inode_bitmap_start + i, i,
                      sb.inode_count, 1, UINT64_MAX);
    batch.write(sb.inode_bitmap_start + i, 1, bufs.back().data());
  }
  // The root directory: empty ("." and ".." are not stored), 0755, owned by root.
  {
    bufs.emplace_back(bs);
    Inode* root = reinterpret_cast<Inode*>(bufs.back().data());
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    root->mode = S_IFDIR | 0755;
    root->nlink = 2;
    root->atime_sec = root->mtime_sec = root->ctime_sec = root->btime_sec = now.tv_sec;
    root->atime_nsec = root->mtime_nsec = root->ctime_nsec = root->btime_nsec = uint32_t(now.tv_nsec);
    root->generation = 1;
    root->checksum = inode_crc(ROOT_INO, *root);
    batch.write(sb.inode_table_start, 1, bufs.back().data());
  }
  // Journal superblock: empty, a random first sequence number so stale blocks never match.
  {
    bufs.emplace_back(bs);
    make_journal_super(bufs.back().data(), sb, fresh_journal_sequence());
    batch.write(sb.journal_start, 1, bufs.back().data());
  }
  // Backup superblock first, primary last: a crash part-way leaves no valid primary.
  bufs.emplace_back(bs);
  std::memcpy(bufs.back().data(), &sb, sizeof(sb));
  batch.write(sb.backup_sb_block, 1, bufs.back().data());
  if (int err = batch.wait()) return Status::io_error(std::string("write failed: ") + strerror(-err));
  if (int err = io.flush()) return Status::io_error(std::string("flush failed: ") + strerror(-err));
  IoBuf primary(bs);
  std::memcpy(primary.data(), &sb, sizeof(sb));
  if (int err = io.write(0, 1, primary.data(), REQ_PREFLUSH | REQ_FUA))
    return Status::io_error(std::string("write failed: ") + strerror(-err));
  if (out) *out = sb;
  return Status();
}

}  // namespace biofs
