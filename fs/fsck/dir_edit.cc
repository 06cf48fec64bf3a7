// The repair's edits of directories, the twins of lib/ext2fs/link.c and unlink.c (ext2fs_link,
// ext2fs_unlink) as e2fsck uses them: an empty block, an entry removed as dir_remove does, an
// entry added (in free space, or a new block at the directory's end), the links they change.
#include <algorithm>
#include <cstring>

#include "lib/printable.h"
#include "fs/fsck/engine.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

void Engine::init_dir_block(DirBlk& b, uint64_t pblk, uint64_t dir) {
  b.data = IoBuf(bs);
  auto* h = reinterpret_cast<DirBlock*>(b.data.data());
  h->h.magic = BLK_DIR;
  h->h.blocknr = pblk;
  h->owner = dir;
  entry(b.data, sizeof(DirBlock))->rec_len = uint16_t(bs - sizeof(DirBlock));
  b.dir = dir;
  b.dirty = true;
}

// Removes the record at `off` as dir_remove does: merged into the one before, or freed.
void Engine::remove_entry(uint64_t pblk, uint32_t off) {
  DirBlk& b = dirblk[pblk];
  uint32_t prev = 0;
  for (uint32_t o = sizeof(DirBlock); o < off; o += entry(b.data, o)->rec_len) prev = o;
  DirEntry* e = entry(b.data, off);
  if (prev) {
    entry(b.data, prev)->rec_len = uint16_t(entry(b.data, prev)->rec_len + e->rec_len);
  } else {
    e->ino = 0;
    e->name_len = 0;
  }
  b.dirty = true;
}

std::vector<uint32_t> Engine::count_refs() {
  std::vector<uint32_t> refs(sb.inode_count + 1, 0);
  for (const Link& l : links)
    if (l.live) refs[l.ino]++;
  return refs;
}

void Engine::drop_link(Link& l, const std::string& problem) {
  fix(false, problem, "entry '" + printable(l.name) +
                          "' in directory " + num(l.dir) + " removed");
  remove_entry(l.pblk, l.off);
  l.live = false;
  touched[l.dir] = touched[l.ino] = 1;
}

// Adds an entry to directory `dir` (a free record's space, or a new block at its end).
bool Engine::dir_add(uint64_t dir, const std::string& name, uint64_t ino) {
  const uint32_t need = dirent_size(uint32_t(name.size()));
  const uint8_t type = dirent_type(in(ino).mode);
  auto place = [&](uint64_t pblk) -> bool {
    DirBlk& b = dirblk[pblk];
    for (uint32_t off = sizeof(DirBlock); off + sizeof(DirEntry) <= bs;) {
      DirEntry* e = entry(b.data, off);
      const uint32_t used = e->ino ? dirent_size(e->name_len) : 0;
      if (e->rec_len - used >= need) {
        uint32_t at = off, rec = e->rec_len;
        if (e->ino) {
          e->rec_len = uint16_t(used);
          at += used;
          rec -= used;
        }
        DirEntry* n = entry(b.data, at);
        n->ino = ino;
        n->hash = dir_hash(sb.hash_seed, name.data(), name.size());
        n->rec_len = uint16_t(rec);
        n->name_len = uint8_t(name.size());
        n->type = type;
        std::memcpy(n + 1, name.data(), name.size());
        b.dirty = true;
        links.push_back(Link{dir, pblk, at, ino, name});
        touched[dir] = touched[ino] = 1;
        return true;
      }
      if (e->rec_len < sizeof(DirEntry)) break;
      off += e->rec_len;
    }
    return false;
  };
  // Newest blocks first: that is where the space is when many entries are added in a row.
  const uint64_t nb = in(dir).size / bs;
  std::vector<uint64_t> blocks;
  for (const Extent& e : ext[dir])
    for (uint64_t l = e.lblk; l < std::min<uint64_t>(e.lblk + e.len, nb); l++) blocks.push_back(e.pblk + (l - e.lblk));
  for (size_t i = blocks.size(); i-- > 0;)
    if (place(blocks[i])) return true;
  auto& v = ext[dir];
  const uint64_t pblk = alloc_block(v.empty() ? 0 : v.back().pblk + v.back().len);
  if (!pblk) return false;
  const std::vector<Extent> before = v;
  if (!v.empty() && v.back().lblk + v.back().len == nb && v.back().pblk + v.back().len == pblk && !v.back().flags &&
      v.back().len < UINT32_MAX)
    v.back().len++;
  else
    v.push_back(Extent{nb, pblk, 1, 0});
  if (!set_map(dir)) {
    unclaim(pblk, 1);
    v = before;
    set_map(dir);  // as it was: needs no more blocks than it had
    return false;
  }
  in(dir).size += bs;
  init_dir_block(dirblk[pblk], pblk, dir);
  return place(pblk);
}

}  // namespace biofs::fsck
