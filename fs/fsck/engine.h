// The state of one fsck run, what e2fsck keeps in its e2fsck_t context (e2fsck/e2fsck.h): the
// inode table and every decision about it, held in memory until the end. The check (-n) and the
// repair (-p, -y) are the same passes: a check decides every repair in memory as -y would and
// writes nothing, as e2fsck -n answers "no" in fix_problem. Each pass is a file of its own; the
// order they run in is fsck.cc's. Private to fs/fsck/: the public API is fsck.h.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fs/block_io.h"
#include "fs/format.h"
#include "fs/fsck/fsck.h"
#include "fs/fsck/read.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

inline std::string num(uint64_t v) { return std::to_string(v); }

// An inode slot as the passes see it. ORPHAN: unlinked while open, left for the next mount to
// free (a check only: a repair frees it, FREED).
enum InodeState : uint8_t { FREE, LIVE, CLEARED, FREED, ORPHAN };

struct Link {  // one directory entry naming a live inode
  uint64_t dir, pblk;
  uint32_t off;
  uint64_t ino;
  std::string name;
  bool live = true;
};

struct Engine {
  BlockIo& io;
  FsckMode mode;
  const std::function<void(const std::string&)>& report;
  const std::atomic<bool>* cancel;
  FsckResult r;
  disk::SuperBlock sb{};
  uint32_t bs = 0;
  bool reset_journal = false;
  uint64_t replayed = 0;  // counted in `repaired` at the end
  bool sb_fix = false;  // the superblock itself needs writing (state, counts, orphan head, backup)

  IoBuf table;                                  // the whole inode table
  std::vector<uint8_t> state, dirty_ino;        // per inode number
  std::vector<std::vector<disk::Extent>> ext;   // per inode: its extents (valid ones only)
  std::vector<std::vector<uint64_t>> tree;      // per inode: its extent tree blocks (index, then leaves)
  std::vector<uint8_t> odd_tree;                // per inode: its tree is not in a shape the filesystem writes
  std::vector<uint8_t> map_dirty;               // per inode: the extent map must be rewritten
  std::vector<uint8_t> owned;                   // per block
  std::map<uint64_t, IoBuf> tree_out;           // extent tree blocks to write
  std::map<uint64_t, IoBuf> xattr_out;          // xattr blocks to write (cut after their last whole entry)
  struct DirBlk {
    IoBuf data;
    uint64_t dir = 0;
    bool dirty = false;
  };
  std::map<uint64_t, DirBlk> dirblk;            // directory blocks by device block
  std::vector<Link> links;
  std::vector<uint64_t> parent;                 // per directory: the directory of its one entry
  std::vector<uint8_t> touched;                 // per inode: its entries changed by a repair
  std::vector<std::pair<uint64_t, IoBuf>> bitmap_out;  // bitmap blocks to write (pass 5)

  bool checking() const { return mode == FsckMode::check; }
  bool preen() const { return mode == FsckMode::preen; }
  bool may_write() const { return !checking() && (mode == FsckMode::yes || r.needs_yes == 0); }
  bool cancelled() const { return cancel && cancel->load(); }
  disk::Inode& in(uint64_t ino) { return table_inode(table, ino); }
  bool in_data(uint64_t b, uint64_t n) const {
    return b >= sb.data_start && n <= sb.block_count - 1 && b <= sb.block_count - 1 - n;
  }

  // ---- problems and what is done about them (problem.cc) -------------------------------------
  // One problem and what is done about it; preen may only do the `safe` ones, a check none (it
  // prints the problem alone and counts an error). The lines wait for the end: when preen must
  // leave an unsafe problem it writes nothing, so its safe repairs are not made either and say
  // so. A warning is a line that is no problem (a journal to replay, an orphan to free).
  // `action` empty: the line is the problem alone.
  struct Line {
    std::string problem, action;
    bool safe;
    bool done = false;  // already written (the journal replay)
  };
  std::vector<Line> lines;
  void fix(bool safe, const std::string& problem, const std::string& action);
  void warn(const std::string& line);
  void note(const std::string& line);  // neither a problem nor a warning
  void flush_lines();
  void fatal(const std::string& why);

  // ---- reading, block ownership, inode slots (util.cc) -----------------------------------------
  bool read(uint64_t blk, uint32_t n, void* buf);
  void unclaim(uint64_t b, uint64_t n);
  uint64_t alloc_block(uint64_t goal);
  void clear_inode(uint64_t ino);
  void make_dir_inode(uint64_t ino, mode_t perm, uint64_t parent_ino);

  // ---- before the passes: the superblock (superblock.cc), the journal (journal_replay.cc) -------
  bool superblock();
  bool journal();

  // ---- pass 1: inodes, their extents and xattr blocks; block ownership ------------------------
  bool load_inodes();                                                       // pass1_inodes.cc
  void pass1();
  void dir_shape(uint64_t ino);
  std::string tree_block(uint64_t blk, IoBuf* out);  // pass1_extents.cc
  std::string read_map(uint64_t ino);
  void xattr_block(uint64_t ino);                                           // pass1_xattr.cc

  // ---- extent maps written in the filesystem's shape (extent_map.cc) ---------------------------
  bool set_map(uint64_t ino);
  void rewrite_maps();

  // ---- the orphan list (orphans.cc) ------------------------------------------------------------
  void check_orphan_list();
  void release_orphans();

  // ---- pass 2: directory blocks and entries (pass2_dirs.cc) ------------------------------------
  void pass2();
  void scan_dir(uint64_t ino);
  void scan_dir_block(uint64_t ino, uint64_t lblk, uint64_t pblk, DirBlk& b);

  // ---- directory edits and the links they make (dir_edit.cc) -----------------------------------
  static disk::DirEntry* entry(IoBuf& b, uint32_t off) { return reinterpret_cast<disk::DirEntry*>(b.data() + off); }
  void init_dir_block(DirBlk& b, uint64_t pblk, uint64_t dir);
  void remove_entry(uint64_t pblk, uint32_t off);
  bool dir_add(uint64_t dir, const std::string& name, uint64_t ino);
  std::vector<uint32_t> count_refs();
  void drop_link(Link& l, const std::string& problem);

  // ---- pass 3: connectivity, lost+found (pass3_connect.cc) -------------------------------------
  void pass3();
  void one_name_per_dir();
  std::vector<uint64_t> unreachable();
  uint64_t lost_and_found();
  void reconnect(std::vector<uint64_t> lost);

  // ---- pass 4: link counts and parent fields (pass4_counts.cc) ---------------------------------
  void pass4();

  // ---- pass 5: bitmaps and free counts (pass5_bitmaps.cc) --------------------------------------
  void pass5();
  void count_in_use();  // inodes, dirs, blocks_used for the summary
  void bitmap(uint64_t start, uint64_t nblocks, uint32_t magic, uint64_t total, const char* what,
              const std::function<bool(uint64_t)>& used, uint64_t* free_count);

  // ---- writing the repairs (write.cc) ----------------------------------------------------------
  int write_all();

  // ---- the order of it all (fsck.cc) -----------------------------------------------------------
  bool stop();
  void run();
  void steps();
};

}  // namespace biofs::fsck
