// Checking and repairing a biofs filesystem (fsck.biofs -n / -p / -y): one engine, the passes in
// e2fsck's order, as e2fsck/e2fsck.c's e2fsck_run runs them, and the exit status of
// e2fsck/unix.c. A check is the same run with writing off (engine.h). First the
// superblock (restored from the backup) and the journal (replayed, or reset when its
// superblock is damaged); pass 1, inodes and their extents and xattr blocks, which claims every
// block; the orphan list; pass 2, directory blocks and entries; the orphans released as mount
// would; pass 3, every directory reachable and lost ones and lost files in /lost+found; pass 4,
// link counts; pass 5, bitmaps and free counts rebuilt from what is owned. Everything is decided
// in memory (engine.h); the changed blocks are written at the end (write.cc), and the device is
// then checked again by the same passes with writing off.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fs/fsck/engine.h"

namespace biofs {

namespace fsck {

using namespace disk;

// Stops before anything else is written: a failure, or the caller cancelled.
bool Engine::stop() {
  if (!r.fatal && cancelled()) r.cancelled = true;
  return r.fatal || r.cancelled;
}

void Engine::run() {
  steps();
  flush_lines();
  r.repaired += replayed;
}

void Engine::steps() {
  if (!superblock() || stop() || !journal() || stop() || !load_inodes()) return;
  pass1();
  if (stop()) return;
  rewrite_maps();
  check_orphan_list();
  pass2();
  if (stop()) return;
  release_orphans();
  pass3();
  pass4();
  pass5();
  if (stop()) return;
  bool dirty = r.repaired || replayed || sb_fix || reset_journal || !tree_out.empty() || !xattr_out.empty() ||
               !bitmap_out.empty();
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++) dirty |= dirty_ino[ino] != 0;
  for (const auto& [pblk, b] : dirblk) dirty |= b.dirty;
  if (!dirty || !may_write()) return;
  flush_lines();
  if (sb.state != STATE_CLEAN) report("filesystem was not cleanly unmounted: marked clean");
  if (int err = write_all()) fatal(std::string("writing the repairs failed: ") + strerror(-err));
}

}  // namespace fsck

FsckResult fsck_check(BlockIo& io, const std::function<void(const std::string&)>& report) {
  fsck::Engine check{io, FsckMode::check, report, nullptr};
  check.run();
  return check.r;
}

FsckResult fsck_repair(BlockIo& io, FsckMode mode, const std::function<void(const std::string&)>& report,
                       const std::atomic<bool>* cancel) {
  if (mode == FsckMode::check) return fsck_check(io, report);
  fsck::Engine rp{io, mode, report, cancel};
  rp.run();
  FsckResult r = rp.r;
  if (r.fatal || r.cancelled) return r;
  // Check again what is on the device now: what the repair could not mend is still an error.
  std::vector<std::string> left;
  const FsckResult after = fsck_check(io, [&](const std::string& l) { left.push_back(l); });
  r.inodes = after.inodes;
  r.dirs = after.dirs;
  r.blocks_used = after.blocks_used;
  r.warnings = after.warnings;
  if (r.needs_yes) {  // nothing but the journal was written: those problems are still there
    r.errors = std::max(r.errors + r.needs_yes, after.errors);
    return r;
  }
  if (after.fatal) {
    r.fatal = true;
    for (const auto& l : left) report("after repair: " + l);
    return r;
  }
  if (after.errors)
    for (const auto& l : left) report("after repair: " + l);
  r.errors += after.errors;
  return r;
}

int fsck_exit_code(const FsckResult& r, FsckMode mode) {
  if (r.fatal) return 8 | (r.changed ? 1 : 0);
  if (r.cancelled) return 32 | (r.changed ? 1 : 0);
  if (mode == FsckMode::check) return r.errors ? 4 : 0;
  // Marking a consistent filesystem clean is a write but no correction.
  return (r.repaired ? 1 : 0) | (r.errors ? 4 : 0);
}

}  // namespace biofs
