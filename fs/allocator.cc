#include "allocator.h"

#include <cerrno>

namespace biofs {

using namespace disk;

int FsAllocator::load() {
  const uint64_t bpb = bitmap_bits_per_block(sb_.block_size);
  auto count = [&](uint64_t start, uint64_t nblocks, uint32_t magic, uint64_t total, uint64_t* free) {
    *free = 0;
    for (uint64_t i = 0; i < nblocks; i++) {
      Buffer* b;
      if (int err = cache_.get(start + i, magic, &b)) return err;
      const uint8_t* bits = b->data.data() + sizeof(BlockHeader);
      const uint64_t n = std::min(bpb, total - i * bpb);
      for (uint64_t k = 0; k < n; k++) *free += !bitmap_bit(bits, k);
    }
    return 0;
  };
  if (int err = count(sb_.block_bitmap_start, sb_.block_bitmap_blocks, BLK_BLOCK_BITMAP, sb_.block_count, &free_blocks_)) return err;
  if (int err = count(sb_.inode_bitmap_start, sb_.inode_bitmap_blocks, BLK_INODE_BITMAP, sb_.inode_count, &free_inodes_)) return err;
  next_block_ = sb_.data_start;
  return 0;
}

int FsAllocator::set_bits(uint64_t bitmap_start, uint32_t magic, uint64_t first, uint64_t n, bool used) {
  const uint64_t bpb = bitmap_bits_per_block(sb_.block_size);
  while (n) {
    Buffer* b;
    if (int err = cache_.get(bitmap_start + first / bpb, magic, &b)) return err;
    uint8_t* bits = b->data.data() + sizeof(BlockHeader);
    uint64_t i = first % bpb;
    for (; i < bpb && n; i++, first++, n--) {
      if (used) bits[i / 8] |= uint8_t(1u << (i % 8));
      else bits[i / 8] &= uint8_t(~(1u << (i % 8)));
    }
    cache_.mark_dirty(b);
  }
  return 0;
}

int FsAllocator::alloc_blocks(uint64_t goal, uint64_t want, uint64_t* start, uint64_t* got) {
  if (free_blocks_ == 0 || want == 0) return -ENOSPC;
  const uint64_t bpb = bitmap_bits_per_block(sb_.block_size);
  const uint64_t total = sb_.block_count;
  if (goal < sb_.data_start || goal >= total) goal = next_block_;
  uint64_t pos = goal;
  // Two passes: from the goal to the end, then from the start of the data area.
  for (uint64_t scanned = 0; scanned < total;) {
    if (pos >= total) pos = sb_.data_start;
    Buffer* b;
    if (int err = cache_.get(sb_.block_bitmap_start + pos / bpb, BLK_BLOCK_BITMAP, &b)) return err;
    const uint8_t* bits = b->data.data() + sizeof(BlockHeader);
    const uint64_t base = pos / bpb * bpb;
    const uint64_t limit = std::min(bpb, total - base);
    for (uint64_t i = pos - base; i < limit; i++) {
      if ((i % 8) == 0 && bits[i / 8] == 0xFF && i + 8 <= limit) {
        i += 7;
        continue;
      }
      if (bitmap_bit(bits, i)) continue;
      uint64_t n = 1;
      while (n < want && i + n < limit && !bitmap_bit(bits, i + n)) n++;
      *start = base + i;
      *got = n;
      if (int err = set_bits(sb_.block_bitmap_start, BLK_BLOCK_BITMAP, *start, n, true)) return err;
      free_blocks_ -= n;
      next_block_ = *start + n;
      return 0;
    }
    scanned += limit - (pos - base);
    pos = base + limit;
  }
  return -ENOSPC;
}

void FsAllocator::free_blocks_later(uint64_t start, uint64_t n) {
  if (!pending_.empty() && pending_.back().first + pending_.back().second == start)
    pending_.back().second += n;
  else
    pending_.push_back({start, n});
  pending_count_ += n;
  for (uint64_t k = 0; k < n; k++) cache_.drop(start + k);
}

uint64_t FsAllocator::pending_bitmap_blocks() const {
  const uint64_t bpb = bitmap_bits_per_block(sb_.block_size);
  uint64_t n = 0;
  for (auto [start, len] : pending_) n += (start + len - 1) / bpb - start / bpb + 1;
  return std::min<uint64_t>(n, sb_.block_bitmap_blocks);
}

int FsAllocator::release_pending() {
  for (auto [start, n] : pending_) {
    if (int err = set_bits(sb_.block_bitmap_start, BLK_BLOCK_BITMAP, start, n, false)) return err;
    free_blocks_ += n;
  }
  pending_.clear();
  pending_count_ = 0;
  return 0;
}

int FsAllocator::alloc_inode(uint64_t* ino) {
  if (free_inodes_ == 0) return -ENOSPC;
  const uint64_t bpb = bitmap_bits_per_block(sb_.block_size);
  for (uint64_t scanned = 0, pos = next_inode_; scanned <= sb_.inode_count; ) {
    if (pos >= sb_.inode_count) pos = 0;
    Buffer* b;
    if (int err = cache_.get(sb_.inode_bitmap_start + pos / bpb, BLK_INODE_BITMAP, &b)) return err;
    const uint8_t* bits = b->data.data() + sizeof(BlockHeader);
    const uint64_t base = pos / bpb * bpb;
    const uint64_t limit = std::min(bpb, sb_.inode_count - base);
    for (uint64_t i = pos - base; i < limit; i++) {
      if (bitmap_bit(bits, i)) continue;
      if (int err = set_bits(sb_.inode_bitmap_start, BLK_INODE_BITMAP, base + i, 1, true)) return err;
      free_inodes_--;
      next_inode_ = base + i + 1;
      *ino = base + i + 1;  // inode n is bit n-1
      return 0;
    }
    scanned += limit - (pos - base);
    pos = base + limit;
  }
  return -ENOSPC;
}

int FsAllocator::free_inode(uint64_t ino) {
  if (int err = set_bits(sb_.inode_bitmap_start, BLK_INODE_BITMAP, ino - 1, 1, false)) return err;
  free_inodes_++;
  return 0;
}

}  // namespace biofs
