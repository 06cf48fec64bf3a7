// The repair's small tools, as e2fsck/util.c is e2fsck's: reading blocks (a failure stops the
// repair), claiming and giving back blocks in the ownership map, and emptying or making an inode
// slot in the table held in memory.
#include <cstring>
#include <ctime>

#include "fs/fsck/engine.h"

namespace biofs::fsck {

using namespace disk;

bool Engine::read(uint64_t blk, uint32_t n, void* buf) {
  if (int err = io.read(blk, n, buf)) {
    fatal(read_failed(blk, err));
    return false;
  }
  return true;
}

void Engine::unclaim(uint64_t b, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) owned[b + i] = 0;
}

// A free data block, searching from `goal`; claimed. 0: the device is full.
uint64_t Engine::alloc_block(uint64_t goal) {
  const uint64_t lo = sb.data_start, hi = sb.block_count - 1;
  if (goal < lo || goal >= hi) goal = lo;
  for (uint64_t i = 0; i < hi - lo; i++) {
    const uint64_t b = lo + (goal - lo + i) % (hi - lo);
    if (!owned[b]) {
      owned[b] = 1;
      return b;
    }
  }
  return 0;
}

void Engine::clear_inode(uint64_t ino) {
  const uint32_t gen = in(ino).generation;
  std::memset(&in(ino), 0, INODE_SIZE);
  in(ino).generation = gen;
  state[ino] = CLEARED;
  dirty_ino[ino] = 1;
  ext[ino].clear();
  tree[ino].clear();
}

void Engine::make_dir_inode(uint64_t ino, mode_t perm, uint64_t parent_ino) {
  const uint32_t gen = in(ino).generation;
  std::memset(&in(ino), 0, INODE_SIZE);
  Inode& d = in(ino);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  d.mode = S_IFDIR | perm;
  d.nlink = 2;
  d.atime_sec = d.mtime_sec = d.ctime_sec = d.btime_sec = now.tv_sec;
  d.atime_nsec = d.mtime_nsec = d.ctime_nsec = d.btime_nsec = uint32_t(now.tv_nsec);
  d.generation = gen + 1;
  d.parent = parent_ino;
  state[ino] = LIVE;
  dirty_ino[ino] = touched[ino] = 1;
  ext[ino].clear();
  tree[ino].clear();
}

}  // namespace biofs::fsck
