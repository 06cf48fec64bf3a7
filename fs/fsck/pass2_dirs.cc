// Pass 2, e2fsck/pass2.c (check_dir_block): each directory block's header, checksum and owner,
// its entry chain (broken: the rest of the block freed), and each entry: malformed, naming a
// free or cleared inode or the root (removed), or of the wrong type (corrected). The entries
// that remain are the links the later passes count.
#include <algorithm>
#include <cstring>

#include "lib/printable.h"
#include "fs/fsck/engine.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

// Every live directory's blocks, in inode order.
void Engine::pass2() {
  for (uint64_t ino = 1; ino <= sb.inode_count && !r.fatal; ino++)
    if (state[ino] == LIVE && S_ISDIR(in(ino).mode)) scan_dir(ino);
}

void Engine::scan_dir(uint64_t ino) {
  const Inode& d = in(ino);
  const uint64_t nb = d.size / bs;
  for (const Extent& e : ext[ino]) {
    for (uint64_t l = e.lblk; l < std::min<uint64_t>(e.lblk + e.len, nb) && !r.fatal;) {
      const uint64_t n = std::min<uint64_t>({64, e.lblk + e.len - l, nb - l});
      IoBuf run(n * bs);
      if (!read(e.pblk + (l - e.lblk), uint32_t(n), run.data())) return;
      for (uint64_t k = 0; k < n; k++) {
        DirBlk& b = dirblk[e.pblk + (l - e.lblk) + k];
        b.data = IoBuf(bs);
        b.dir = ino;
        std::memcpy(b.data.data(), run.data() + k * bs, bs);
        scan_dir_block(ino, l + k, e.pblk + (l - e.lblk) + k, b);
      }
      l += n;
    }
  }
}

void Engine::scan_dir_block(uint64_t ino, uint64_t lblk, uint64_t pblk, DirBlk& b) {
  const std::string who = "directory " + num(ino) + " block " + num(lblk);
  auto* h = reinterpret_cast<DirBlock*>(b.data.data());
  if (!block_header_ok(b.data.data(), bs, BLK_DIR, pblk)) {
    fix(false, who + " (block " + num(pblk) + ") fails its checksum or header check",
        "emptied (the inodes it named go to lost+found)");
    init_dir_block(b, pblk, ino);
    return;
  }
  if (h->owner != ino) {
    fix(false, who + " belongs to another inode (" + num(h->owner) + ")", "given to directory " + num(ino));
    h->owner = ino;
    b.dirty = true;
  }
  for (uint32_t off = sizeof(DirBlock); off < bs;) {
    DirEntry* e = entry(b.data, off);
    if (!dir_record_fits(b.data.data(), bs, off)) {
      fix(false, who + " has a broken entry chain at byte " + num(off), "the rest of the block freed");
      if (off == sizeof(DirBlock)) {
        e->ino = 0;
        e->name_len = 0;
        e->rec_len = uint16_t(bs - off);
      } else {
        uint32_t prev = sizeof(DirBlock);
        while (prev + entry(b.data, prev)->rec_len < off) prev += entry(b.data, prev)->rec_len;
        entry(b.data, prev)->rec_len = uint16_t(bs - prev);
      }
      b.dirty = true;
      break;
    }
    const uint32_t rec = e->rec_len;
    if (e->ino) {
      const size_t shown = std::min<size_t>(e->name_len, rec - sizeof(DirEntry));
      const std::string name = printable({reinterpret_cast<const char*>(e + 1), shown});
      std::string bad;
      if (e->name_len == 0 || dirent_size(e->name_len) > rec) bad = " has a malformed entry at byte " + num(off);
      else if (e->ino > sb.inode_count || state[e->ino] == FREE) bad = " entry '" + name + "' names free inode " + num(e->ino);
      else if (state[e->ino] == CLEARED) bad = " entry '" + name + "' names inode " + num(e->ino) + ", which was cleared";
      else if (e->ino == ROOT_INO) bad = " entry '" + name + "' names the root directory";
      if (!bad.empty()) {
        fix(false, "directory " + num(ino) + bad, "entry removed");
        remove_entry(pblk, off);
        touched[ino] = 1;
        if (e->ino <= sb.inode_count) touched[e->ino] = 1;
      } else {
        const uint8_t want = dirent_type(in(e->ino).mode);
        if (e->type != want) {
          fix(true, "directory " + num(ino) + " entry '" + name + "' has the wrong type", "type corrected");
          e->type = want;
          b.dirty = true;
        }
        links.push_back(Link{ino, pblk, off, e->ino, std::string(reinterpret_cast<const char*>(e + 1), e->name_len)});
      }
    }
    off += rec;
  }
}

}  // namespace biofs::fsck
