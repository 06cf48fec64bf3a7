// Pass 1's check of an inode's external xattr block, e2fsck/pass1.c's check_ext_attr: in the
// data area, claimed by no one before, its header, checksum, owner and entries sound (parsed by
// xattr_block.cc as the filesystem reads it), the superblock's feature bit set. A damaged block
// is dropped (the flag cleared; nothing claims the block, so pass 5 frees it) or cut after its
// last whole entry.
#include "fs/fsck/engine.h"
#include "fs/io_buf.h"
#include "fs/xattr_block.h"

namespace biofs::fsck {

using namespace disk;

// Inode `ino`'s xattr block, after its extents claimed theirs: claimed when sound (the
// superblock given the feature if it lacks it), cut after its last whole entry, or dropped
// (the flag cleared; nothing claims the block, so the bitmaps free it).
void Engine::xattr_block(uint64_t ino) {
  Inode& d = in(ino);
  const uint64_t blk = xattr::block_of(d);
  if (!blk) return;
  const std::string who = "inode " + num(ino) + " xattr block " + num(blk);
  auto drop = [&](const std::string& problem) {
    fix(false, problem, "dropped (flag cleared, block freed; its attributes are lost)");
    xattr::set_block(d, 0);
    if (d.blocks) d.blocks--;
    dirty_ino[ino] = 1;
  };
  if (!in_data(blk, 1)) return drop(who + " is outside the data area");
  if (owned[blk]) return drop("block " + num(blk) + " is claimed twice (again by inode " + num(ino) + "'s xattr block)");
  IoBuf b(bs);
  if (!read(blk, 1, b.data())) return;
  xattr::ParsedBlock p = xattr::parse_block(b.data(), bs, blk, ino, true);
  if (p.state == xattr::BlockState::bad_header) return drop(who + " " + p.why);
  if (p.attrs.empty()) return drop(who + (p.state == xattr::BlockState::ok ? " holds no entries" : " " + p.why));
  if (p.state == xattr::BlockState::bad_entries) {
    fix(false, who + " " + p.why, "cut after the last whole entry (" + num(p.attrs.size()) + " kept)");
    xattr::pack_block(b.data(), bs, blk, ino, p.attrs);
    xattr_out[blk] = std::move(b);
  }
  owned[blk] = 1;
  if (!(sb.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK)) {
    fix(false, who + ": the superblock lacks the xattr block feature", "feature set");
    sb.feature_incompat |= FEATURE_INCOMPAT_XATTR_BLOCK;
    sb_fix = true;
  }
}

}  // namespace biofs::fsck
