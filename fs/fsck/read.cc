// The inode table and the orphan list, read with their bound and loop checks (read.h).
#include "fs/fsck/read.h"
#include "fs/io_buf.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace biofs::fsck {

using namespace disk;

std::string read_failed(uint64_t blk, int err) {
  return "cannot read block " + std::to_string(blk) + ": " + strerror(-err);
}

bool read_inode_table(const SuperBlock& sb, const BlockReader& read, IoBuf* table) {
  const uint64_t bs = sb.block_size;
  *table = IoBuf(sb.inode_table_blocks * bs);
  const uint64_t chunk = 256;
  for (uint64_t b = 0; b < sb.inode_table_blocks; b += chunk) {
    const uint64_t n = std::min(chunk, sb.inode_table_blocks - b);
    if (!read(sb.inode_table_start + b, uint32_t(n), table->data() + b * bs)) return false;
  }
  return true;
}

std::string walk_orphan_list(const SuperBlock& sb, const IoBuf& table, const std::function<bool(uint64_t)>& usable,
                             const std::function<void(uint64_t)>& visit) {
  std::vector<uint8_t> seen(sb.inode_count + 1, 0);
  for (uint64_t p = sb.orphan_head; p; p = table_inode(table, p).next_orphan) {
    if (p > sb.inode_count || !usable(p) || !(table_inode(table, p).flags & INODE_ORPHAN))
      return "orphan list names inode " + std::to_string(p) + ", which is not an orphan";
    if (seen[p]) return "orphan list loops at inode " + std::to_string(p);
    seen[p] = 1;
    if (visit) visit(p);
  }
  return "";
}

}  // namespace biofs::fsck
