// Writing the repairs, as lib/ext2fs/closefs.c (ext2fs_flush) writes e2fsck's: the primary
// superblock marked "error" first, then every changed block as bios (inode table, directory,
// extent tree, xattr and bitmap blocks, a reset journal superblock), a flush, and the
// superblock last: the backup, then the primary with PREFLUSH|FUA.
#include <algorithm>
#include <cstring>
#include <ctime>

#include "fs/fsck/engine.h"
#include "fs/io_batch.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

int Engine::write_all() {
  // The superblock says "error" until the last write, so a repair cut short is seen as one.
  IoBuf sbuf(bs);
  SuperBlock w = sb;
  w.state = STATE_ERROR;
  w.checksum = superblock_crc(w);
  std::memcpy(sbuf.data(), &w, sizeof(w));
  if (int err = io.write(0, 1, sbuf.data(), REQ_PREFLUSH | REQ_FUA)) return err;
  r.changed = true;
  const uint64_t ipb = bs / INODE_SIZE;
  std::vector<uint8_t> table_dirty(sb.inode_table_blocks, 0);
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
    if (!dirty_ino[ino]) continue;
    if (state[ino] == LIVE) in(ino).checksum = inode_crc(ino, in(ino));
    table_dirty[(ino - 1) / ipb] = 1;
  }
  std::vector<std::pair<uint64_t, const uint8_t*>> out;
  for (uint64_t b = 0; b < sb.inode_table_blocks; b++)
    if (table_dirty[b]) out.push_back({sb.inode_table_start + b, table.data() + b * bs});
  for (auto& [pblk, b] : dirblk) {
    if (!b.dirty) continue;
    set_block_crc(b.data.data(), bs);
    out.push_back({pblk, b.data.data()});
  }
  for (auto& [pblk, b] : tree_out) {
    set_block_crc(b.data(), bs);
    out.push_back({pblk, b.data()});
  }
  for (auto& [pblk, b] : xattr_out) {
    set_block_crc(b.data(), bs);
    out.push_back({pblk, b.data()});
  }
  for (auto& [pblk, b] : bitmap_out) out.push_back({pblk, b.data()});
  IoBuf jsb(bs);
  if (reset_journal) {
    make_journal_super(jsb.data(), sb, fresh_journal_sequence());
    out.push_back({sb.journal_start, jsb.data()});
  }
  for (size_t i = 0; i < out.size(); i += 256) {
    IoBatch batch(&io);
    for (size_t k = i; k < std::min(out.size(), i + 256); k++) batch.write(out[k].first, 1, out[k].second);
    if (int err = batch.wait()) return err;
  }
  if (int err = io.flush()) return err;
  sb.state = STATE_CLEAN;
  sb.orphan_head = 0;
  sb.write_time = int64_t(time(nullptr));
  sb.checksum = superblock_crc(sb);
  std::memset(sbuf.data(), 0, bs);
  std::memcpy(sbuf.data(), &sb, sizeof(sb));
  if (int err = io.write(sb.backup_sb_block, 1, sbuf.data())) return err;
  return io.write(0, 1, sbuf.data(), REQ_PREFLUSH | REQ_FUA);
}

}  // namespace biofs::fsck
