// Directories: blocks of rec_len-chained entries (format.h), indexed in memory by name the
// first time a directory is used, so lookups and inserts stay O(1) at 100,000 entries.
#include "dir.h"

#include <cerrno>
#include <cstring>

#include "extent_map.h"

namespace biofs {

using namespace disk;

static DirEntry* entry_at(Buffer* b, uint32_t off) { return reinterpret_cast<DirEntry*>(b->data.data() + off); }

int Dir::dir_load(InodeObj* dir) {
  if (dir->dir) return 0;
  if (dir->d.size % s_.bs) return -EUCLEAN;
  auto map = std::make_unique<std::unordered_map<std::string, InodeObj::DirLoc>>();
  std::vector<uint32_t> free;
  const uint64_t nblocks = dir->d.size / s_.bs;
  for (uint64_t lblk = 0; lblk < nblocks; lblk++) {
    uint64_t run;
    const uint64_t pblk = extents_.map_block(dir, lblk, &run, nullptr);
    if (!pblk) return -EUCLEAN;
    Buffer* b;
    if (int err = s_.cache.get(pblk, BLK_DIR, &b)) return err;
    if (reinterpret_cast<const DirBlock*>(b->data.data())->owner != dir->ino) return -EUCLEAN;
    uint32_t fr = 0;
    for (uint32_t off = sizeof(DirBlock); off < s_.bs;) {
      if (!dir_record_fits(b->data.data(), s_.bs, off)) return -EUCLEAN;  // also a chain that stops short
      const DirEntry* e = entry_at(b, off);
      if (e->ino && (e->name_len == 0 || dirent_size(e->name_len) > e->rec_len || e->ino > s_.sb.inode_count))
        return -EUCLEAN;
      if (e->ino) {
        map->emplace(std::string(reinterpret_cast<const char*>(e + 1), e->name_len),
                     InodeObj::DirLoc{e->ino, lblk, off, e->type});
        fr += e->rec_len - dirent_size(e->name_len);
      } else {
        fr += e->rec_len;
      }
      off += e->rec_len;
    }
    free.push_back(fr);
  }
  dir->dir = std::move(map);
  dir->dir_free = std::move(free);
  return 0;
}

int Dir::dir_find(InodeObj* dir, const std::string& name, InodeObj::DirLoc* loc) {
  if (int err = dir_load(dir)) return err;
  auto it = dir->dir->find(name);
  if (it == dir->dir->end()) return -ENOENT;
  *loc = it->second;
  return 0;
}

int Dir::dir_add(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type) {
  if (int err = dir_load(dir)) return err;
  const uint32_t need = dirent_size(uint32_t(name.size()));
  auto place = [&](Buffer* b, uint64_t lblk) -> bool {
    for (uint32_t off = sizeof(DirBlock); off < s_.bs;) {
      DirEntry* e = entry_at(b, off);
      // Coalesce a run of free records first.
      if (!e->ino) {
        while (off + e->rec_len < s_.bs && !entry_at(b, off + e->rec_len)->ino)
          e->rec_len = uint16_t(e->rec_len + entry_at(b, off + e->rec_len)->rec_len);
      }
      const uint32_t used = e->ino ? dirent_size(e->name_len) : 0;
      if (e->rec_len - used >= need) {
        uint32_t at = off;
        uint32_t rec = e->rec_len;
        if (e->ino) {  // split the live record's slack off
          e->rec_len = uint16_t(used);
          at = off + used;
          rec -= used;
        }
        DirEntry* n = entry_at(b, at);
        n->ino = ino;
        n->hash = dir_hash(s_.sb.hash_seed, name.data(), name.size());
        n->name_len = uint8_t(name.size());
        n->type = type;
        n->rec_len = uint16_t(rec);
        std::memcpy(n + 1, name.data(), name.size());
        (*dir->dir)[name] = InodeObj::DirLoc{ino, lblk, at, type};
        dir->dir_free[lblk] -= need;
        s_.cache.mark_dirty(b);
        return true;
      }
      off += e->rec_len;
    }
    return false;
  };
  // Try blocks from the last one backwards: new entries cluster at the end, and old blocks
  // with space (after deletions) are found by their free-byte hint.
  for (size_t i = dir->dir_free.size(); i-- > 0;) {
    if (dir->dir_free[i] < need) continue;
    uint64_t run;
    const uint64_t pblk = extents_.map_block(dir, i, &run, nullptr);
    Buffer* b;
    if (int err = s_.cache.get(pblk, BLK_DIR, &b)) return err;
    if (place(b, i)) return 0;
    dir->dir_free[i] = 0;  // fragmented: do not look here again until something is removed
  }
  // A new block at the end of the directory.
  const uint64_t lblk = dir->d.size / s_.bs;
  if (int err = extents_.allocate_range(dir, lblk, 1)) return err;
  uint64_t run;
  const uint64_t pblk = extents_.map_block(dir, lblk, &run, nullptr);
  Buffer* b = s_.cache.get_new(pblk, BLK_DIR);
  reinterpret_cast<DirBlock*>(b->data.data())->owner = dir->ino;
  entry_at(b, sizeof(DirBlock))->rec_len = uint16_t(s_.bs - sizeof(DirBlock));
  dir->d.size += s_.bs;
  dir->dir_free.push_back(s_.bs - uint32_t(sizeof(DirBlock)));
  if (int err = extents_.save_extents(dir)) return err;
  place(b, lblk);
  return 0;
}

int Dir::dir_remove(InodeObj* dir, const std::string& name) {
  if (int err = dir_load(dir)) return err;
  auto it = dir->dir->find(name);
  if (it == dir->dir->end()) return -ENOENT;
  const InodeObj::DirLoc loc = it->second;
  uint64_t run;
  const uint64_t pblk = extents_.map_block(dir, loc.lblk, &run, nullptr);
  Buffer* b;
  if (int err = s_.cache.get(pblk, BLK_DIR, &b)) return err;
  DirEntry* e = entry_at(b, loc.off);
  const uint32_t freed = dirent_size(e->name_len);  // its slack was already counted free
  // Merge into the previous record when there is one (as ext2), else mark it free.
  uint32_t prev = 0;
  for (uint32_t off = sizeof(DirBlock); off < loc.off; off += entry_at(b, off)->rec_len) prev = off;
  if (prev) {
    entry_at(b, prev)->rec_len = uint16_t(entry_at(b, prev)->rec_len + e->rec_len);
  } else {
    e->ino = 0;
    e->name_len = 0;
  }
  dir->dir_free[loc.lblk] += freed;
  dir->dir->erase(it);
  s_.cache.mark_dirty(b);
  return 0;
}

int Dir::dir_replace(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type) {
  if (int err = dir_load(dir)) return err;
  auto it = dir->dir->find(name);
  if (it == dir->dir->end()) return -ENOENT;
  uint64_t run;
  const uint64_t pblk = extents_.map_block(dir, it->second.lblk, &run, nullptr);
  Buffer* b;
  if (int err = s_.cache.get(pblk, BLK_DIR, &b)) return err;
  DirEntry* e = entry_at(b, it->second.off);
  e->ino = ino;
  e->type = type;
  it->second.ino = ino;
  it->second.type = type;
  s_.cache.mark_dirty(b);
  return 0;
}

bool Dir::dir_empty(InodeObj* dir) { return dir_load(dir) == 0 && dir->dir->empty(); }

}  // namespace biofs
