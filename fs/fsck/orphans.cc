// The orphan list (inodes unlinked while open), e2fsck/super.c's release_orphan_inodes: the list
// checked for a name that is no orphan and for a loop (cut there), and after pass 2 each orphan
// freed as mount would free it, or, while a directory still names it, taken off the list. A
// check leaves an orphan to the next mount: a warning, its inode and blocks still in use.
#include "fs/fsck/engine.h"
#include "fs/xattr_block.h"

namespace biofs::fsck {

using namespace disk;

void Engine::check_orphan_list() {
  const std::string bad = walk_orphan_list(sb, table, [&](uint64_t p) { return p != ROOT_INO && state[p] == LIVE; });
  if (!bad.empty()) fix(true, bad, "list cut there");
  if (sb.orphan_head) sb_fix = true;  // emptied below: every orphan is dealt with now
}

// Orphans are freed as mount would free them (unlinked, nothing names them); an inode marked
// orphan that is still named just loses the mark.
void Engine::release_orphans() {
  std::vector<uint32_t> refs = count_refs();
  for (uint64_t ino = 2; ino <= sb.inode_count; ino++) {
    Inode& d = in(ino);
    if (state[ino] != LIVE || !(d.flags & INODE_ORPHAN)) continue;
    if (d.nlink == 0 && refs[ino] == 0 && checking()) {
      warn("inode " + num(ino) + " is an orphan (unlinked while open): the next mount frees it");
      state[ino] = ORPHAN;
    } else if (d.nlink == 0 && refs[ino] == 0) {
      fix(true, "inode " + num(ino) + " is an orphan (unlinked while open)", "freed");
      for (const Extent& e : ext[ino]) unclaim(e.pblk, e.len);
      for (uint64_t t : tree[ino]) unclaim(t, 1);
      if (const uint64_t xb = xattr::block_of(d)) {  // claimed in pass 1 (else dropped)
        unclaim(xb, 1);
        xattr_out.erase(xb);
      }
      clear_inode(ino);
      state[ino] = FREED;
      map_dirty[ino] = 0;
    } else {
      fix(true, "inode " + num(ino) + " is marked orphan but still in use", "taken off the orphan list");
      d.flags &= ~INODE_ORPHAN;
      d.next_orphan = 0;
      dirty_ino[ino] = 1;
    }
  }
  for (Link& l : links)
    if (state[l.dir] != LIVE || state[l.ino] != LIVE) l.live = false;  // inside a freed directory
  for (auto& [pblk, b] : dirblk)
    if (state[b.dir] != LIVE) b.dirty = false;
}

}  // namespace biofs::fsck
