#include "trim.h"

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "io_batch.h"

namespace biofs {

using namespace disk;

namespace {

// One bitmap block's share of [first, last], under the exclusive lock: its free runs of at least
// minlen blocks discarded. The lock is held until they are done, so no run is allocated and
// written while its discard is in flight (ext4 marks the extent used for the same reason,
// ext4_trim_extent()). A block freed in the running transaction keeps its bit until the commit
// (allocator.h): the committed metadata may still point at it, and it is not discarded.
int trim_group(FsInfo& s, uint64_t first, uint64_t last, uint64_t minlen, uint64_t* trimmed) {
  const uint64_t bpb = bitmap_bits_per_block(s.bs), base = first / bpb * bpb;
  std::unique_lock ex(s.lock);
  if (s.commit.failed()) return s.commit.refusal();
  Buffer* b;
  if (int err = s.cache.get(s.sb.block_bitmap_start + first / bpb, BLK_BLOCK_BITMAP, &b)) return err;
  const uint8_t* bits = b->data.data() + sizeof(BlockHeader);
  IoBatch batch(&s.io);
  uint64_t blocks = 0;
  for (uint64_t i = first - base; i <= last - base;) {
    if (bitmap_bit(bits, i)) {
      i++;
      continue;
    }
    uint64_t n = 1;
    while (i + n <= last - base && !bitmap_bit(bits, i + n)) n++;
    if (n >= minlen) {
      batch.discard(base + i, n);
      blocks += n;
    }
    i += n;
  }
  if (int err = batch.wait()) return err;
  *trimmed += blocks * s.bs;
  return 0;
}

}  // namespace

int trim_fs(FsInfo& s, const TrimRange& r, uint64_t* trimmed) {
  *trimmed = 0;
  const uint64_t bs = s.bs, max_blks = s.sb.block_count, bpb = bitmap_bits_per_block(s.bs);
  const uint64_t start = r.start / bs;
  uint64_t end = start + r.len / bs - 1;
  const uint64_t minlen = r.minlen / bs;  // 0 takes every run, as one block (the granularity)
  if (minlen > bpb || start >= max_blks || r.len < bs) return -EINVAL;
  const RequestQueue* q = s.io.bdev()->queue;
  if (!q || q->limits().max_discard_sectors == 0) return -EOPNOTSUPP;
  if (s.read_only) return -EROFS;
  // The bitmap covers the whole device, its metadata marked in use: no first_data_blk to skip.
  if (end >= max_blks - 1) end = max_blks - 1;  // len / bs < 2^52: start + it cannot wrap
  for (uint64_t first = start; first <= end;) {
    const uint64_t last = std::min(end, first / bpb * bpb + bpb - 1);
    if (int err = trim_group(s, first, last, minlen, trimmed)) return err;
    first = last + 1;
  }
  return 0;
}

}  // namespace biofs
