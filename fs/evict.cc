// The end of an inode's life: forget, eviction, freeing, the orphan list at mount (evict.h).
#include "evict.h"

#include <cerrno>
#include <mutex>

namespace biofs {

using namespace disk;

void Evict::forget(uint64_t ino, uint64_t nlookup) {
  std::unique_lock ex(s_.lock);
  auto it = s_.inodes.find(ino);
  if (it == s_.inodes.end()) return;
  InodeObj* in = it->second.get();
  const uint64_t had = in->nlookup.load(std::memory_order_relaxed);
  in->nlookup.store(nlookup >= had ? 0 : had - nlookup, std::memory_order_relaxed);
  // Freeing an unlinked inode dirties its table block, the bitmaps and its predecessor on the
  // orphan list: thousands of forgets in a row must commit as they go, as every other
  // operation does, or their transaction outgrows the journal. (A failed commit stops writing
  // and says so; forget has no one to tell.)
  if (s_.commit.maybe_commit() == 0) maybe_free_inode(in);
}

void Evict::maybe_free_inode(InodeObj* in) {
  if (in->ino == ROOT_INO) return;
  if (in->nlookup || in->open) {
    if (in->d.nlink == 0) itable_.orphan_add(in);
    return;
  }
  const uint64_t ino = in->ino;
  if (in->d.nlink == 0) {
    itable_.orphan_remove(in);
    extents_.punch_extents(in, 0, UINT64_MAX);
    extents_.save_extents(in);  // frees the tree blocks
    xattrs_.xattr_release_block(in);
    itable_.free_inode(in);
  }
  s_.inodes.erase(ino);  // an inode still linked is just evicted from memory
}

int Evict::free_orphans() {
  for (uint64_t steps = 0; s_.sb.orphan_head; steps++) {
    InodeObj* in;
    int err = itable_.iget(s_.sb.orphan_head, &in);
    // Every step takes the head off the list; one that cannot (an inode not marked orphan, the
    // root, a list longer than the table) would loop forever.
    if (!err && (!(in->d.flags & INODE_ORPHAN) || in->ino == ROOT_INO || steps > s_.sb.inode_count)) err = -EUCLEAN;
    if (err) {
      s_.sb.orphan_head = 0;  // a broken list: drop it, fsck finds what it held
      itable_.save_superblock_journaled();
      return err;
    }
    in->nlookup = 0;
    in->open = 0;
    if (in->d.nlink) {
      if (int err = itable_.orphan_remove(in)) return err;
      itable_.isave(in);
    }
    maybe_free_inode(in);
    if (int err = s_.commit.maybe_commit()) return err;
  }
  return 0;
}

}  // namespace biofs
