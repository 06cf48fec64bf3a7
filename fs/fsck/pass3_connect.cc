// Pass 3, e2fsck/pass3.c (check_directory, e2fsck_get_lost_and_found, e2fsck_reconnect_file),
// with pass4.c's disconnect_inode for files: each directory keeps one name; directories cut
// off from the root (loops included) and files in no directory are reconnected in /lost+found,
// made when missing.
#include <algorithm>
#include <set>

#include "fs/fsck/engine.h"

namespace biofs::fsck {

using namespace disk;

void Engine::pass3() {
  one_name_per_dir();
  reconnect(unreachable());
}

// A directory keeps one entry (the one its parent field agrees with, else the first).
void Engine::one_name_per_dir() {
  std::vector<std::vector<size_t>> by(sb.inode_count + 1);
  for (size_t i = 0; i < links.size(); i++)
    if (links[i].live && S_ISDIR(in(links[i].ino).mode)) by[links[i].ino].push_back(i);
  for (uint64_t ino = 2; ino <= sb.inode_count; ino++) {
    auto& v = by[ino];
    if (v.empty()) continue;
    size_t keep = v[0];
    for (size_t i : v)
      if (links[i].dir == in(ino).parent) {
        keep = i;
        break;
      }
    for (size_t i : v)
      if (i != keep) drop_link(links[i], "directory " + num(ino) + " is named by " + num(v.size()) + " entries");
    parent[ino] = links[keep].dir;
  }
}

// Directories cut off from the root (a lost parent, a loop) and inodes in no directory.
std::vector<uint64_t> Engine::unreachable() {
  const uint64_t n = sb.inode_count + 1;
  std::vector<std::vector<size_t>> kids(n);
  for (size_t i = 0; i < links.size(); i++)
    if (links[i].live && S_ISDIR(in(links[i].ino).mode)) kids[links[i].dir].push_back(i);
  std::vector<uint8_t> reach(n, 0);
  auto walk = [&](uint64_t top) {
    std::vector<uint64_t> stack{top};
    reach[top] = 1;
    while (!stack.empty()) {
      const uint64_t x = stack.back();
      stack.pop_back();
      for (size_t i : kids[x])
        if (links[i].live && !reach[links[i].ino]) {
          reach[links[i].ino] = 1;
          stack.push_back(links[i].ino);
        }
    }
  };
  walk(ROOT_INO);
  std::vector<uint64_t> lost;
  std::vector<uint64_t> stamp(n, 0);
  for (uint64_t ino = 2; ino < n; ino++) {
    if (state[ino] != LIVE || !S_ISDIR(in(ino).mode) || reach[ino]) continue;
    // Climb to the top of the detached tree; a loop is cut where the climb meets itself.
    uint64_t x = ino;
    while (parent[x] && !stamp[x] && !reach[parent[x]]) {
      stamp[x] = ino;
      x = parent[x];
    }
    if (stamp[x] == ino && parent[x]) {
      for (Link& l : links)
        if (l.live && l.ino == x) drop_link(l, "directory " + num(x) + " is in a loop of directories cut off from the root");
      parent[x] = 0;
    }
    lost.push_back(x);
    walk(x);
  }
  std::vector<uint32_t> refs = count_refs();
  for (uint64_t ino = 2; ino < n; ino++)
    if (state[ino] == LIVE && !S_ISDIR(in(ino).mode) && refs[ino] == 0) lost.push_back(ino);
  return lost;
}

// /lost+found: the root's entry of that name, or a new directory.
uint64_t Engine::lost_and_found() {
  for (Link& l : links) {
    if (!l.live || l.dir != ROOT_INO || l.name != "lost+found") continue;
    if (S_ISDIR(in(l.ino).mode)) return l.ino;
    drop_link(l, "'lost+found' in the root is not a directory");
    return 0;  // the caller asks again: what it named is now lost too
  }
  uint64_t ino = 2;
  while (ino <= sb.inode_count && state[ino] == LIVE) ino++;
  if (ino > sb.inode_count) {
    report("no free inode to make lost+found: lost inodes stay where they are");
    r.errors++;
    return UINT64_MAX;
  }
  const uint64_t blk = alloc_block(0);
  if (!blk) {
    report("no free block to make lost+found: lost inodes stay where they are");
    r.errors++;
    return UINT64_MAX;
  }
  fix(false, "there is no lost+found directory", "made it (inode " + num(ino) + ")");
  make_dir_inode(ino, 0700, ROOT_INO);
  in(ino).size = bs;
  ext[ino] = {Extent{0, blk, 1, 0}};
  set_map(ino);
  init_dir_block(dirblk[blk], blk, ino);
  parent[ino] = ROOT_INO;
  if (!dir_add(ROOT_INO, "lost+found", ino)) {
    report("no space in the root directory for lost+found");
    r.errors++;
    return UINT64_MAX;
  }
  return ino;
}

void Engine::reconnect(std::vector<uint64_t> lost) {
  if (lost.empty()) return;
  uint64_t lf = lost_and_found();
  if (lf == 0) {  // a file named lost+found was unlinked: it is lost now too
    std::vector<uint32_t> refs = count_refs();
    for (uint64_t ino = 2; ino <= sb.inode_count; ino++)
      if (state[ino] == LIVE && !S_ISDIR(in(ino).mode) && refs[ino] == 0 &&
          std::find(lost.begin(), lost.end(), ino) == lost.end())
        lost.push_back(ino);
    lf = lost_and_found();
  }
  if (lf == 0 || lf == UINT64_MAX) return;
  std::set<std::string> taken;
  for (const Link& l : links)
    if (l.live && l.dir == lf) taken.insert(l.name);
  for (uint64_t ino : lost) {
    if (ino == lf) continue;
    const bool dir = S_ISDIR(in(ino).mode);
    std::string name = "#" + num(ino);
    for (int k = 1; taken.count(name) && k < 100; k++) name = "#" + num(ino) + "." + num(k);
    taken.insert(name);
    if (!dir_add(lf, name, ino)) {
      report("inode " + num(ino) + " is in no directory and lost+found is full: left where it is");
      r.errors++;
      return;
    }
    fix(false, std::string(dir ? "directory " : "inode ") + num(ino) + " is in no directory", "reconnected as /lost+found/" + name);
    if (dir) {
      parent[ino] = lf;
      in(ino).parent = lf;
      dirty_ino[ino] = 1;
    }
  }
}

}  // namespace biofs::fsck
