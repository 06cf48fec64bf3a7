// Pass 4, e2fsck/pass4.c: each live inode's link count against the entries that name it (a
// directory: 2 and one per subdirectory), and each directory's parent field against the
// directory that names it.
#include "fs/fsck/engine.h"

namespace biofs::fsck {

using namespace disk;

// Link counts and parent fields from the entries that remain.
void Engine::pass4() {
  std::vector<uint32_t> refs = count_refs();
  std::vector<uint32_t> subdirs(sb.inode_count + 1, 0);
  for (const Link& l : links)
    if (l.live && S_ISDIR(in(l.ino).mode)) subdirs[l.dir]++;
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
    if (state[ino] != LIVE) continue;
    Inode& d = in(ino);
    const bool dir = S_ISDIR(d.mode);
    const uint64_t want = dir ? 2 + subdirs[ino] : refs[ino];
    if (want == 0) continue;  // still lost (no room in lost+found): reported there
    if (d.nlink != want) {
      // A count that the repair's own entry changes moved is part of that repair.
      if (!touched[ino])
        fix(true, "inode " + num(ino) + " link count " + num(d.nlink) + ", should be " + num(want), "corrected");
      d.nlink = uint32_t(want);
      dirty_ino[ino] = 1;
    }
    if (dir && ino != ROOT_INO && parent[ino] && d.parent != parent[ino]) {
      fix(true, "directory " + num(ino) + " names parent " + num(d.parent) + ", not " + num(parent[ino]), "corrected");
      d.parent = parent[ino];
      dirty_ino[ino] = 1;
    }
  }
}

}  // namespace biofs::fsck
