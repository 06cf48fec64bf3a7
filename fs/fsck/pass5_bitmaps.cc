// Pass 5, e2fsck/pass5.c (check_block_bitmaps, check_inode_bitmaps): both bitmaps built from
// what the passes before leave owned and live, compared bit by bit with the disk (a block that
// fails its checksum is rebuilt whole), and the superblock's free counts.
#include <cstring>

#include "fs/fsck/engine.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

void Engine::bitmap(uint64_t start, uint64_t nblocks, uint32_t magic, uint64_t total, const char* what,
            const std::function<bool(uint64_t)>& used, uint64_t* free_count) {
  const uint64_t bpb = bitmap_bits_per_block(bs);
  uint64_t wrong = 0;
  *free_count = 0;
  for (uint64_t i = 0; i < nblocks && !r.fatal; i++) {
    IoBuf want(bs), have(bs);
    auto* h = reinterpret_cast<BlockHeader*>(want.data());
    h->magic = magic;
    h->blocknr = start + i;
    uint8_t* bits = want.data() + sizeof(BlockHeader);
    for (uint64_t k = 0; k < bpb; k++) {
      const uint64_t n = i * bpb + k;
      const bool set = n >= total || used(n);
      if (set) bits[k / 8] |= uint8_t(1u << (k % 8));
      else (*free_count)++;
    }
    set_block_crc(want.data(), bs);
    if (!read(start + i, 1, have.data())) return;
    if (std::memcmp(want.data(), have.data(), bs) == 0) continue;
    if (!block_header_ok(have.data(), bs, magic, start + i)) {
      fix(true, std::string(what) + " block " + num(start + i) + " fails its checksum or header check", "rebuilt");
    } else {
      const uint8_t* old = have.data() + sizeof(BlockHeader);
      for (uint64_t k = 0; k < bpb && i * bpb + k < total; k++) {
        if (((old[k / 8] ^ bits[k / 8]) >> (k % 8)) & 1) {
          const bool now = (bits[k / 8] >> (k % 8)) & 1;
          const std::string thing = magic == BLK_BLOCK_BITMAP ? "block " + num(i * bpb + k) : "inode " + num(i * bpb + k + 1);
          if (wrong++ < 20)
            fix(true, thing + (now ? " is in use but marked free" : " is marked in use but nothing owns it"),
                now ? "marked in use" : "marked free");
          else
            (checking() ? r.errors : r.repaired)++;
        }
      }
    }
    bitmap_out.emplace_back(start + i, std::move(want));
  }
  if (wrong > 20 && checking()) note(std::string(what) + ": " + num(wrong - 20) + " more bits wrong");
  else if (wrong > 20) lines.push_back(Line{what, num(wrong - 20) + " more bits corrected", true});
}

void Engine::pass5() {
  uint64_t fb = 0, fi = 0;
  bitmap(sb.block_bitmap_start, sb.block_bitmap_blocks, BLK_BLOCK_BITMAP, sb.block_count, "block bitmap",
         [&](uint64_t b) { return owned[b] != 0; }, &fb);
  bitmap(sb.inode_bitmap_start, sb.inode_bitmap_blocks, BLK_INODE_BITMAP, sb.inode_count, "inode bitmap",
         [&](uint64_t i) { return state[i + 1] == LIVE || state[i + 1] == ORPHAN; }, &fi);
  if (sb.free_blocks != fb || sb.free_inodes != fi) {
    if (sb.state == STATE_CLEAN)
      fix(true, "superblock free counts (" + num(sb.free_blocks) + " blocks, " + num(sb.free_inodes) +
                    " inodes) differ from the bitmaps (" + num(fb) + ", " + num(fi) + ")",
          "corrected");
    sb.free_blocks = fb;
    sb.free_inodes = fi;
    sb_fix = true;
  }
  count_in_use();
}

// What the summary line counts: inodes in use (orphans a check leaves included), directories,
// and the data area's blocks that inodes own.
void Engine::count_in_use() {
  r.inodes = r.dirs = r.blocks_used = 0;
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
    if (state[ino] != LIVE && state[ino] != ORPHAN) continue;
    r.inodes++;
    r.dirs += S_ISDIR(in(ino).mode) ? 1 : 0;
  }
  for (uint64_t b = sb.data_start; b + 1 < sb.block_count; b++) r.blocks_used += owned[b] ? 1 : 0;
}

}  // namespace biofs::fsck
