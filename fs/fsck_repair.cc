// Repairing a biofs filesystem (fsck.biofs -p / -y). No kernel twin: e2fsck's passes are the
// model. The superblock (restored from the backup), the journal (replayed, or reset when its
// superblock is damaged), inodes and extents (bad ones cleared, a block owned twice stays with
// its first owner and the later one is truncated there), the orphan list (processed as mount
// would), directory blocks and entries, the tree (every directory reachable, lost ones and lost
// files in /lost+found), link counts, then bitmaps and free counts rebuilt from what is owned.
// An inode's xattr block is claimed after its extents; a damaged one is dropped (its flag
// cleared, the block left to the bitmaps to free) or cut after its last whole entry.
// Everything is decided in memory; the changed blocks are written at the end as bios, then a
// flush, then the superblock (backup, then primary with PREFLUSH|FUA).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "blockcore/printable.h"
#include "format.h"
#include "fsck.h"
#include "journal.h"
#include "xattr_block.h"

namespace biofs {

using namespace disk;

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

enum : uint8_t { FREE, LIVE, CLEARED, FREED };  // an inode slot's state as the repair sees it

struct Link {      // one directory entry naming a live inode
  uint64_t dir, pblk;
  uint32_t off;
  uint64_t ino;
  std::string name;
  bool live = true;
};

struct Repairer {
  BlockIo& io;
  FsckMode mode;
  const std::function<void(const std::string&)>& report;
  const std::atomic<bool>* cancel;
  FsckResult r;
  SuperBlock sb{};
  uint32_t bs = 0;
  bool reset_journal = false;
  uint64_t replayed = 0;  // counted in `repaired` at the end
  bool sb_fix = false;  // the superblock itself needs writing (state, counts, orphan head, backup)

  IoBuf table;                                  // the whole inode table
  std::vector<uint8_t> state, dirty_ino;        // per inode number
  std::vector<std::vector<Extent>> ext;         // per inode: its extents (valid ones only)
  std::vector<std::vector<uint64_t>> tree;      // per inode: its extent tree blocks
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

  bool preen() const { return mode == FsckMode::preen; }
  bool may_write() const { return mode == FsckMode::yes || r.needs_yes == 0; }
  bool cancelled() const { return cancel && cancel->load(); }
  Inode& in(uint64_t ino) { return *reinterpret_cast<Inode*>(table.data() + (ino - 1) * INODE_SIZE); }

  // One problem and what is done about it; preen may only do the `safe` ones. The lines wait
  // for the end: when preen must leave an unsafe problem it writes nothing, so its safe
  // repairs are not made either and say so.
  struct Line {
    std::string problem, action;
    bool safe;
    bool done = false;  // already written (the journal replay)
  };
  std::vector<Line> lines;
  void fix(bool safe, const std::string& problem, const std::string& action) {
    if (preen() && !safe) r.needs_yes++;
    else r.repaired++;
    lines.push_back(Line{problem, action, safe});
  }
  void flush_lines() {
    const bool blocked = preen() && r.needs_yes;
    for (const Line& l : lines) {
      if (!blocked || l.done) report(l.problem + ": " + l.action);
      else if (!l.safe) report(l.problem + " (needs -y: " + l.action + ")");
      else report(l.problem + " (not repaired: preen stops where -y is needed)");
    }
    lines.clear();
    if (blocked) r.repaired = 0;
  }
  void fatal(const std::string& why) {
    flush_lines();
    report(why);
    r.fatal = true;
  }
  bool read(uint64_t blk, uint32_t n, void* buf) {
    if (int err = io.read(blk, n, buf)) {
      fatal("cannot read block " + num(blk) + ": " + strerror(-err));
      return false;
    }
    return true;
  }
  bool in_data(uint64_t b, uint64_t n) const {
    return b >= sb.data_start && n <= sb.block_count - 1 && b <= sb.block_count - 1 - n;
  }
  void unclaim(uint64_t b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) owned[b + i] = 0;
  }
  // A free data block, searching from `goal`; claimed. 0: the device is full.
  uint64_t alloc_block(uint64_t goal) {
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

  // ---- the superblock and the journal ------------------------------------------------------
  bool superblock() {
    io.set_block_size(4096);
    const std::string why = read_superblock(io, &sb, false);
    if (!why.empty()) {
      // Mount takes the backup only while the primary still says biofs (anything else may be
      // another filesystem); a repair the user asked for looks when the magic is gone too.
      if (!find_backup_superblock(io, &sb)) {
        fatal("primary superblock: " + why + "; no backup superblock found either");
        return false;
      }
      fix(false, "primary superblock: " + why, "restored from the backup");
      sb_fix = true;
    }
    bs = sb.block_size;
    io.set_block_size(bs);
    if (!why.empty() && may_write()) {  // before the journal replays over it
      IoBuf b(bs);
      SuperBlock w = sb;
      w.state = STATE_ERROR;
      w.checksum = superblock_crc(w);
      std::memcpy(b.data(), &w, sizeof(w));
      if (int err = io.write(0, 1, b.data(), REQ_PREFLUSH | REQ_FUA)) {
        fatal(std::string("cannot write the superblock: ") + strerror(-err));
        return false;
      }
      r.changed = true;
    }
    IoBuf b(bs);
    if (!read(sb.backup_sb_block, 1, b.data())) return false;
    SuperBlock bk;
    std::memcpy(&bk, b.data(), sizeof(bk));
    if (!check_superblock(bk, io.device_bytes()).empty() || std::memcmp(bk.uuid, sb.uuid, 16) != 0) {
      fix(true, "backup superblock is damaged", "rewritten from the primary");
      sb_fix = true;
    }
    if (sb.state != STATE_CLEAN) sb_fix = true;  // marked clean at the end, not an error
    return true;
  }

  bool journal() {
    IoBuf b(bs);
    if (!read(sb.journal_start, 1, b.data())) return false;
    const auto* j = reinterpret_cast<const JournalSuper*>(b.data());
    std::string bad;
    if (j->h.magic != BLK_JOURNAL_SB || j->h.blocknr != sb.journal_start || !block_crc_ok(b.data(), bs))
      bad = "journal superblock (block " + num(sb.journal_start) + ") fails its checksum or header check";
    else if (std::memcmp(j->uuid, sb.uuid, 16) != 0)
      bad = "journal belongs to another filesystem";
    else if (j->head < 1 || j->head >= sb.journal_blocks)
      bad = "journal head out of range";
    if (!bad.empty()) {
      fix(false, bad, "reset to an empty journal (nothing in it is replayed)");
      reset_journal = true;
      return true;
    }
    Journal jn(io, sb);
    int n = 0;
    if (!may_write()) {
      jn.recover(&n, false);
      if (n) report("journal holds a committed transaction: not replayed while other repairs need -y");
      return true;
    }
    if (std::string e = jn.recover(&n, true); !e.empty()) {
      fatal(e);
      return false;
    }
    if (!n) return true;
    r.changed = true;
    lines.push_back(Line{"journal", "replayed " + num(n) + " committed transaction" + (n > 1 ? "s" : ""), true, true});
    replayed = 1;
    // The superblock itself may have been replayed (it is logged when the orphan list changes).
    SuperBlock now;
    if (read_superblock(io, &now, false).empty() && std::memcmp(now.uuid, sb.uuid, 16) == 0 &&
        now.block_count == sb.block_count && now.inode_count == sb.inode_count && now.block_size == sb.block_size)
      sb = now;
    sb_fix = true;
    return true;
  }

  // ---- inodes and their extents ------------------------------------------------------------
  bool load_inodes() {
    table = IoBuf(sb.inode_table_blocks * bs);
    const uint64_t chunk = 256;
    for (uint64_t b = 0; b < sb.inode_table_blocks; b += chunk) {
      const uint64_t n = std::min(chunk, sb.inode_table_blocks - b);
      if (!read(sb.inode_table_start + b, uint32_t(n), table.data() + b * bs)) return false;
    }
    const uint64_t n = sb.inode_count + 1;
    state.assign(n, FREE);
    dirty_ino.assign(n, 0);
    ext.assign(n, {});
    tree.assign(n, {});
    map_dirty.assign(n, 0);
    parent.assign(n, 0);
    touched.assign(n, 0);
    owned.assign(sb.block_count, 0);
    for (uint64_t b = 0; b < sb.data_start; b++) owned[b] = 1;
    owned[sb.backup_sb_block] = 1;
    return true;
  }

  void clear_inode(uint64_t ino) {
    const uint32_t gen = in(ino).generation;
    std::memset(&in(ino), 0, INODE_SIZE);
    in(ino).generation = gen;
    state[ino] = CLEARED;
    dirty_ino[ino] = 1;
    ext[ino].clear();
    tree[ino].clear();
  }

  void make_dir_inode(uint64_t ino, mode_t perm, uint64_t parent_ino) {
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

  // An extent tree block as fsck reads it: header, checksum, owner, level, count. "" or why not.
  std::string tree_block(uint64_t ino, uint64_t blk, int level, IoBuf* out) {
    if (!in_data(blk, 1)) return "extent tree block " + num(blk) + " is outside the data area";
    *out = IoBuf(bs);
    if (!read(blk, 1, out->data())) return "extent tree block " + num(blk) + " cannot be read";
    const auto* n = reinterpret_cast<const ExtentNode*>(out->data());
    if (n->h.magic != BLK_EXTENT || n->h.blocknr != blk || !block_crc_ok(out->data(), bs))
      return "extent tree block " + num(blk) + " fails its checksum or header check";
    if (n->owner != ino || n->nr > extents_per_node(bs) || (level < 0 ? n->level > 1 : n->level != level))
      return "extent tree block " + num(blk) + " is inconsistent";
    return "";
  }

  // Reads inode `ino`'s extent map into ext/tree. "" or why it is unusable.
  std::string read_map(uint64_t ino) {
    const Inode& d = in(ino);
    if (d.flags & INODE_INLINE_DATA) return "";
    if (!(d.flags & INODE_EXTENT_TREE)) {
      if (d.nr_extents > INLINE_EXTENTS) return "has " + num(d.nr_extents) + " inline extents";
      ext[ino].assign(d.extents, d.extents + d.nr_extents);
      return "";
    }
    IoBuf root;
    if (std::string why = tree_block(ino, d.extent_root, -1, &root); !why.empty()) return why;
    if (r.fatal) return "";
    tree[ino].push_back(d.extent_root);
    const auto* rn = reinterpret_cast<const ExtentNode*>(root.data());
    auto leaf = [&](const IoBuf& b) {
      const auto* n = reinterpret_cast<const ExtentNode*>(b.data());
      const auto* e = reinterpret_cast<const Extent*>(b.data() + sizeof(ExtentNode));
      ext[ino].insert(ext[ino].end(), e, e + n->nr);
    };
    if (rn->level == 0) {
      leaf(root);
      return "";
    }
    const auto* idx = reinterpret_cast<const ExtentIndex*>(root.data() + sizeof(ExtentNode));
    for (uint16_t i = 0; i < rn->nr; i++) {
      IoBuf lb;
      if (std::string why = tree_block(ino, idx[i].child, 0, &lb); !why.empty()) return why;
      if (r.fatal) return "";
      tree[ino].push_back(idx[i].child);
      leaf(lb);
    }
    return "";
  }

  static uint64_t tree_blocks_for(uint64_t n, uint32_t per) {
    if (n <= INLINE_EXTENTS) return 0;
    const uint64_t leaves = (n + per - 1) / per;
    return leaves == 1 ? 1 : 1 + leaves;
  }

  // Pass 1: every inode's checksum and map; blocks claimed in inode order, so a block owned
  // twice stays with the first owner and the later one is truncated where it claims it.
  void inodes() {
    const uint32_t per = extents_per_node(bs);
    {
      const Inode& root = in(ROOT_INO);
      std::string bad;
      if (root.mode == 0) bad = "the root inode is free";
      else if (inode_crc(ROOT_INO, root) != root.checksum) bad = "the root inode fails its checksum";
      else if (!S_ISDIR(root.mode)) bad = "the root inode is not a directory";
      if (!bad.empty()) {
        fix(false, bad, "made a new empty root directory (what it held goes to lost+found)");
        make_dir_inode(ROOT_INO, 0755, 0);
        map_dirty[ROOT_INO] = 1;
      }
    }
    for (uint64_t ino = 1; ino <= sb.inode_count && !r.fatal; ino++) {
      Inode& d = in(ino);
      if (d.mode == 0) continue;
      const std::string who = "inode " + num(ino);
      if (state[ino] == LIVE && ino == ROOT_INO && map_dirty[ino]) continue;  // the new root
      if (inode_crc(ino, d) != d.checksum) {
        fix(false, who + " fails its checksum", "cleared");
        clear_inode(ino);
        continue;
      }
      state[ino] = LIVE;
      if (const uint32_t whole = xattr::inline_whole(d); whole != d.xattr_len) {
        fix(false, who + " inline xattr area is damaged (" + num(d.xattr_len) + " bytes, " + num(whole) + " in whole entries)",
            "cut after the last whole entry");
        std::memset(d.xattr + whole, 0, xattr::inline_capacity(d) - whole);  // not the block's address
        d.xattr_len = uint16_t(whole);
        dirty_ino[ino] = 1;
      }
      if ((d.flags & INODE_INLINE_DATA) && !S_ISLNK(d.mode)) {  // only symlinks keep data there
        fix(false, who + " is not a symlink but has inline data", "its map dropped");
        d.flags &= ~(INODE_INLINE_DATA | INODE_EXTENT_TREE);
        d.nr_extents = 0;
        std::memset(d.extents, 0, sizeof(d.extents));
        dirty_ino[ino] = 1;
      }
      if (S_ISLNK(d.mode)) {  // readlink refuses a target longer than these
        const uint64_t most = (d.flags & INODE_INLINE_DATA) ? sizeof(d.inline_data) : 4095;
        if (d.size > most) {
          fix(false, "symlink " + num(ino) + " has size " + num(d.size) + ", longer than its target can be", "cut to " + num(most));
          d.size = most;
          dirty_ino[ino] = 1;
        }
      }
      if (std::string why = read_map(ino); !why.empty()) {
        if (ino == ROOT_INO) {
          fix(false, "the root directory's " + why, "made a new empty root directory (what it held goes to lost+found)");
          make_dir_inode(ROOT_INO, 0755, 0);
          map_dirty[ROOT_INO] = 1;
        } else {
          fix(false, who + " " + why, "cleared");
          clear_inode(ino);
        }
        continue;
      }
      if (r.fatal) return;
      const bool had_tree = d.flags & INODE_EXTENT_TREE;
      const uint64_t old_tree = tree[ino].size();
      auto& v = ext[ino];
      uint64_t old_data = 0;
      for (const Extent& e : v) old_data += e.len;
      // The tree blocks, then the data: the first block already in use ends the map there.
      bool tree_ok = true;
      for (size_t i = 0; i < tree[ino].size() && tree_ok; i++) {
        const uint64_t t = tree[ino][i];
        tree_ok = !owned[t] && std::count(tree[ino].begin(), tree[ino].begin() + i, t) == 0;
      }
      if (!tree_ok) {
        fix(false, who + " extent tree uses a block already in use (claimed twice)", "truncated to 0 bytes");
        v.clear();
        tree[ino].clear();
        d.size = 0;
        map_dirty[ino] = dirty_ino[ino] = 1;
      }
      for (uint64_t t : tree[ino]) owned[t] = 1;
      uint64_t prev_end = 0;
      for (size_t i = 0; i < v.size(); i++) {
        if (v[i].flags & ~EXTENT_UNWRITTEN) {
          fix(false, who + " extent at file block " + num(v[i].lblk) + " has unknown flags", "flags cleared");
          v[i].flags &= EXTENT_UNWRITTEN;
          map_dirty[ino] = dirty_ino[ino] = 1;
        }
        const Extent& e = v[i];
        std::string why;
        if (e.len == 0 || e.lblk < prev_end || e.lblk > UINT64_MAX / bs - e.len) {
          why = who + " has overlapping or empty extents at file block " + num(e.lblk);
        } else if (!in_data(e.pblk, e.len)) {
          why = who + " claims blocks " + num(e.pblk) + "+" + num(e.len) + " outside the data area";
        } else {
          for (uint64_t b = e.pblk; b < e.pblk + e.len; b++)
            if (owned[b]) {
              why = "block " + num(b) + " is claimed twice (again by " + who + ")";
              break;
            }
        }
        if (why.empty()) {
          for (uint64_t b = e.pblk; b < e.pblk + e.len; b++) owned[b] = 1;
          prev_end = e.lblk + e.len;
          continue;
        }
        const uint64_t cut = std::max(e.lblk, prev_end);
        const uint64_t size = cut > d.size / bs ? d.size : cut * bs;
        fix(false, why, who + " truncated at file block " + num(cut) + " (size " + num(d.size) + " -> " + num(size) + ")");
        d.size = size;
        v.resize(i);
        map_dirty[ino] = dirty_ino[ino] = 1;
        break;
      }
      if (S_ISDIR(d.mode)) dir_shape(ino);
      xattr_block(ino);
      if (r.fatal) return;
      // The block count, and a tree in the shape the filesystem writes.
      if (!map_dirty[ino]) {
        const uint64_t canon = had_tree ? std::max<uint64_t>(1, tree_blocks_for(v.size(), per)) : 0;
        const uint64_t xb = xattr::block_of(d) ? 1 : 0;
        if (had_tree && old_tree != canon) {
          fix(true, who + " extent tree is not in its usual shape (" + num(old_tree) + " blocks for " + num(v.size()) + " extents)",
              "rewritten");
          map_dirty[ino] = 1;
        } else if (d.blocks != old_data + canon + xb) {
          fix(true, who + " says " + num(d.blocks) + " blocks but owns " + num(old_data + canon + xb), "corrected");
          d.blocks = old_data + canon + xb;
          dirty_ino[ino] = 1;
        }
      }
    }
  }

  // Inode `ino`'s xattr block, after its extents claimed theirs: claimed when sound (the
  // superblock given the feature if it lacks it), cut after its last whole entry, or dropped
  // (the flag cleared; nothing claims the block, so the bitmaps free it).
  void xattr_block(uint64_t ino) {
    Inode& d = in(ino);
    const uint64_t blk = xattr::block_of(d);
    if (!blk) return;
    const std::string who = "inode " + num(ino) + " xattr block " + num(blk);
    auto drop = [&](const std::string& problem) {
      fix(false, problem, "dropped (flag cleared, block freed; its attributes are lost)");
      xattr::set_block(d, 0);
      if (d.blocks) d.blocks--;
      dirty_ino[ino] = 1;
    };
    if (!in_data(blk, 1)) return drop(who + " is outside the data area");
    if (owned[blk]) return drop("block " + num(blk) + " is claimed twice (again by inode " + num(ino) + "'s xattr block)");
    IoBuf b(bs);
    if (!read(blk, 1, b.data())) return;
    xattr::ParsedBlock p = xattr::parse_block(b.data(), bs, blk, ino, true);
    if (p.state == xattr::BlockState::bad_header) return drop(who + " " + p.why);
    if (p.attrs.empty()) return drop(who + (p.state == xattr::BlockState::ok ? " holds no entries" : " " + p.why));
    if (p.state == xattr::BlockState::bad_entries) {
      fix(false, who + " " + p.why, "cut after the last whole entry (" + num(p.attrs.size()) + " kept)");
      xattr::pack_block(b.data(), bs, blk, ino, p.attrs);
      xattr_out[blk] = std::move(b);
    }
    owned[blk] = 1;
    if (!(sb.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK)) {
      fix(false, who + ": the superblock lacks the xattr block feature", "feature set");
      sb.feature_incompat |= FEATURE_INCOMPAT_XATTR_BLOCK;
      sb_fix = true;
    }
  }

  // A directory's size is whole blocks, all mapped from block 0.
  void dir_shape(uint64_t ino) {
    Inode& d = in(ino);
    const std::string who = "directory " + num(ino);
    if (d.size % bs) {
      fix(false, who + " size " + num(d.size) + " is not a multiple of the block size", "rounded down");
      d.size -= d.size % bs;
      dirty_ino[ino] = 1;
    }
    uint64_t covered = 0;
    for (const Extent& e : ext[ino]) {
      if (e.lblk > covered) break;
      covered = std::max<uint64_t>(covered, e.lblk + e.len);
    }
    if (covered < d.size / bs) {
      fix(false, who + " has a hole at block " + num(covered), "truncated to " + num(covered) + " blocks");
      d.size = covered * bs;
      dirty_ino[ino] = 1;
    }
    // Blocks past the end of a directory are never read: give them back.
    auto& v = ext[ino];
    const uint64_t nb = d.size / bs;
    std::vector<Extent> keep;
    for (const Extent& e : v) {
      if (e.lblk >= nb) {
        unclaim(e.pblk, e.len);
      } else if (e.lblk + e.len > nb) {
        unclaim(e.pblk + (nb - e.lblk), e.lblk + e.len - nb);
        keep.push_back(Extent{e.lblk, e.pblk, uint32_t(nb - e.lblk), e.flags});
      } else {
        keep.push_back(e);
      }
    }
    if (keep.size() != v.size() || (!keep.empty() && keep.back().len != v[keep.size() - 1].len)) {
      fix(false, who + " maps blocks past its end (block " + num(nb) + " on)", "they are given back");
      v = std::move(keep);
      map_dirty[ino] = dirty_ino[ino] = 1;
    }
  }

  // Writes inode `ino`'s map as the filesystem does (inline up to four extents, else a tree),
  // reusing its tree blocks and allocating more if it must. false: no space.
  bool set_map(uint64_t ino) {
    Inode& d = in(ino);
    auto& v = ext[ino];
    auto& t = tree[ino];
    const uint32_t per = extents_per_node(bs);
    const uint64_t need = tree_blocks_for(v.size(), per);
    while (t.size() > need) {
      unclaim(t.back(), 1);
      t.pop_back();
    }
    while (t.size() < need) {
      const uint64_t b = alloc_block(v.empty() ? 0 : v.back().pblk + v.back().len);
      if (!b) return false;
      t.push_back(b);
    }
    uint64_t data = 0;
    for (const Extent& e : v) data += e.len;
    d.blocks = data + t.size() + (xattr::block_of(d) ? 1 : 0);
    dirty_ino[ino] = 1;
    if (d.flags & INODE_INLINE_DATA) {  // the extent area holds data: no map at all
      d.flags &= ~INODE_EXTENT_TREE;
      return true;
    }
    std::memset(d.extents, 0, sizeof(d.extents));
    if (need == 0) {
      d.flags &= ~INODE_EXTENT_TREE;
      d.extent_root = 0;
      d.nr_extents = uint16_t(v.size());
      std::copy(v.begin(), v.end(), d.extents);
      return true;
    }
    auto node = [&](uint64_t blk, uint16_t level, uint16_t nr) {
      IoBuf b(bs);
      auto* n = reinterpret_cast<ExtentNode*>(b.data());
      n->h.magic = BLK_EXTENT;
      n->h.blocknr = blk;
      n->owner = ino;
      n->level = level;
      n->nr = nr;
      n->max = uint16_t(per);
      return b;
    };
    if (need == 1) {
      IoBuf b = node(t[0], 0, uint16_t(v.size()));
      std::memcpy(b.data() + sizeof(ExtentNode), v.data(), v.size() * sizeof(Extent));
      tree_out[t[0]] = std::move(b);
    } else {
      IoBuf root = node(t[0], 1, uint16_t(need - 1));
      auto* idx = reinterpret_cast<ExtentIndex*>(root.data() + sizeof(ExtentNode));
      for (size_t i = 0; i + 1 < need; i++) {
        const size_t first = i * per, count = std::min<size_t>(per, v.size() - first);
        idx[i] = ExtentIndex{v[first].lblk, t[i + 1], 0};
        IoBuf b = node(t[i + 1], 0, uint16_t(count));
        std::memcpy(b.data() + sizeof(ExtentNode), &v[first], count * sizeof(Extent));
        tree_out[t[i + 1]] = std::move(b);
      }
      tree_out[t[0]] = std::move(root);
    }
    d.flags |= INODE_EXTENT_TREE;
    d.extent_root = t[0];
    d.nr_extents = 0;
    return true;
  }

  // ---- the orphan list -----------------------------------------------------------------------
  void orphan_list() {
    std::vector<uint8_t> seen(sb.inode_count + 1, 0);
    for (uint64_t p = sb.orphan_head; p;) {
      std::string bad;
      if (p > sb.inode_count || p == ROOT_INO || state[p] != LIVE || !(in(p).flags & INODE_ORPHAN))
        bad = "orphan list names inode " + num(p) + ", which is not an orphan";
      else if (seen[p])
        bad = "orphan list loops at inode " + num(p);
      if (!bad.empty()) {
        fix(true, bad, "list cut there");
        break;
      }
      seen[p] = 1;
      p = in(p).next_orphan;
    }
    if (sb.orphan_head) sb_fix = true;  // emptied below: every orphan is dealt with now
  }

  // ---- directories ---------------------------------------------------------------------------
  static DirEntry* entry(IoBuf& b, uint32_t off) { return reinterpret_cast<DirEntry*>(b.data() + off); }

  void init_dir_block(DirBlk& b, uint64_t pblk, uint64_t dir) {
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
  void remove_entry(uint64_t pblk, uint32_t off) {
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

  void scan_dir(uint64_t ino) {
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

  void scan_dir_block(uint64_t ino, uint64_t lblk, uint64_t pblk, DirBlk& b) {
    const std::string who = "directory " + num(ino) + " block " + num(lblk);
    auto* h = reinterpret_cast<DirBlock*>(b.data.data());
    if (h->h.magic != BLK_DIR || h->h.blocknr != pblk || !block_crc_ok(b.data.data(), bs)) {
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
      if (off + sizeof(DirEntry) > bs || e->rec_len < sizeof(DirEntry) || e->rec_len % 8 || off + e->rec_len > bs) {
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
          const uint8_t want = uint8_t((in(e->ino).mode & S_IFMT) >> 12);
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

  // ---- orphans, names, the tree ----------------------------------------------------------------
  std::vector<uint32_t> count_refs() {
    std::vector<uint32_t> refs(sb.inode_count + 1, 0);
    for (const Link& l : links)
      if (l.live) refs[l.ino]++;
    return refs;
  }

  void drop_link(Link& l, const std::string& problem) {
    fix(false, problem, "entry '" + printable(l.name) +
                            "' in directory " + num(l.dir) + " removed");
    remove_entry(l.pblk, l.off);
    l.live = false;
    touched[l.dir] = touched[l.ino] = 1;
  }

  // Orphans are freed as mount would free them (unlinked, nothing names them); an inode marked
  // orphan that is still named just loses the mark.
  void orphans() {
    std::vector<uint32_t> refs = count_refs();
    for (uint64_t ino = 2; ino <= sb.inode_count; ino++) {
      Inode& d = in(ino);
      if (state[ino] != LIVE || !(d.flags & INODE_ORPHAN)) continue;
      if (d.nlink == 0 && refs[ino] == 0) {
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

  // A directory keeps one entry (the one its parent field agrees with, else the first).
  void one_name_per_dir() {
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
  std::vector<uint64_t> unreachable() {
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

  // Adds an entry to directory `dir` (a free record's space, or a new block at its end).
  bool dir_add(uint64_t dir, const std::string& name, uint64_t ino) {
    const uint32_t need = dirent_size(uint32_t(name.size()));
    const uint8_t type = uint8_t((in(ino).mode & S_IFMT) >> 12);
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

  // /lost+found: the root's entry of that name, or a new directory.
  uint64_t lost_and_found() {
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

  void reconnect(std::vector<uint64_t> lost) {
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

  // Link counts and parent fields from the entries that remain.
  void counts() {
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

  // ---- bitmaps and the superblock ----------------------------------------------------------
  std::vector<std::pair<uint64_t, IoBuf>> bitmap_out;

  void bitmap(uint64_t start, uint64_t nblocks, uint32_t magic, uint64_t total, const char* what,
              const std::function<bool(uint64_t)>& used, uint64_t* free_count) {
    const uint64_t bpb = bitmap_bits_per_block(bs);
    uint64_t wrong = 0;
    *free_count = 0;
    for (uint64_t i = 0; i < nblocks && !r.fatal; i++) {
      IoBuf want(bs), have(bs);
      auto* h = reinterpret_cast<BlockHeader*>(want.data());
      h->magic = magic;
      h->blocknr = start + i;
      uint8_t* bits = want.data() + sizeof(BlockHeader);
      for (uint64_t k = 0; k < bpb; k++) {
        const uint64_t n = i * bpb + k;
        const bool set = n >= total || used(n);
        if (set) bits[k / 8] |= uint8_t(1u << (k % 8));
        else (*free_count)++;
      }
      set_block_crc(want.data(), bs);
      if (!read(start + i, 1, have.data())) return;
      if (std::memcmp(want.data(), have.data(), bs) == 0) continue;
      const auto* hh = reinterpret_cast<const BlockHeader*>(have.data());
      if (hh->magic != magic || hh->blocknr != start + i || !block_crc_ok(have.data(), bs)) {
        fix(true, std::string(what) + " block " + num(start + i) + " fails its checksum or header check", "rebuilt");
      } else {
        const uint8_t* old = have.data() + sizeof(BlockHeader);
        for (uint64_t k = 0; k < bpb && i * bpb + k < total; k++) {
          if (((old[k / 8] ^ bits[k / 8]) >> (k % 8)) & 1) {
            const bool now = (bits[k / 8] >> (k % 8)) & 1;
            const std::string thing = magic == BLK_BLOCK_BITMAP ? "block " + num(i * bpb + k) : "inode " + num(i * bpb + k + 1);
            if (wrong++ < 20)
              fix(true, thing + (now ? " is in use but marked free" : " is marked in use but nothing owns it"),
                  now ? "marked in use" : "marked free");
            else
              r.repaired++;
          }
        }
      }
      bitmap_out.emplace_back(start + i, std::move(want));
    }
    if (wrong > 20) lines.push_back(Line{what, num(wrong - 20) + " more bits corrected", true});
  }

  void bitmaps() {
    uint64_t fb = 0, fi = 0;
    bitmap(sb.block_bitmap_start, sb.block_bitmap_blocks, BLK_BLOCK_BITMAP, sb.block_count, "block bitmap",
           [&](uint64_t b) { return owned[b] != 0; }, &fb);
    bitmap(sb.inode_bitmap_start, sb.inode_bitmap_blocks, BLK_INODE_BITMAP, sb.inode_count, "inode bitmap",
           [&](uint64_t i) { return state[i + 1] == LIVE; }, &fi);
    if (sb.free_blocks != fb || sb.free_inodes != fi) {
      if (sb.state == STATE_CLEAN)
        fix(true, "superblock free counts (" + num(sb.free_blocks) + " blocks, " + num(sb.free_inodes) +
                      " inodes) differ from the bitmaps (" + num(fb) + ", " + num(fi) + ")",
            "corrected");
      sb.free_blocks = fb;
      sb.free_inodes = fi;
      sb_fix = true;
    }
  }

  // ---- writing -----------------------------------------------------------------------------
  int write_all() {
    // The superblock says "error" until the last write, so a repair cut short is seen as one.
    IoBuf sbuf(bs);
    SuperBlock w = sb;
    w.state = STATE_ERROR;
    w.checksum = superblock_crc(w);
    std::memcpy(sbuf.data(), &w, sizeof(w));
    if (int err = io.write(0, 1, sbuf.data(), REQ_PREFLUSH | REQ_FUA)) return err;
    r.changed = true;
    const uint64_t ipb = bs / INODE_SIZE;
    std::vector<uint8_t> table_dirty(sb.inode_table_blocks, 0);
    for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
      if (!dirty_ino[ino]) continue;
      if (state[ino] == LIVE) in(ino).checksum = inode_crc(ino, in(ino));
      table_dirty[(ino - 1) / ipb] = 1;
    }
    std::vector<std::pair<uint64_t, const uint8_t*>> out;
    for (uint64_t b = 0; b < sb.inode_table_blocks; b++)
      if (table_dirty[b]) out.push_back({sb.inode_table_start + b, table.data() + b * bs});
    for (auto& [pblk, b] : dirblk) {
      if (!b.dirty) continue;
      set_block_crc(b.data.data(), bs);
      out.push_back({pblk, b.data.data()});
    }
    for (auto& [pblk, b] : tree_out) {
      set_block_crc(b.data(), bs);
      out.push_back({pblk, b.data()});
    }
    for (auto& [pblk, b] : xattr_out) {
      set_block_crc(b.data(), bs);
      out.push_back({pblk, b.data()});
    }
    for (auto& [pblk, b] : bitmap_out) out.push_back({pblk, b.data()});
    IoBuf jsb(bs);
    if (reset_journal) {
      auto* j = reinterpret_cast<JournalSuper*>(jsb.data());
      j->h.magic = BLK_JOURNAL_SB;
      j->h.blocknr = sb.journal_start;
      std::random_device rd;
      j->sequence = (uint64_t(rd()) << 32 | rd()) >> 2;  // stale journal blocks never match it
      j->head = 1;
      j->block_size = bs;
      std::memcpy(j->uuid, sb.uuid, 16);
      set_block_crc(jsb.data(), bs);
      out.push_back({sb.journal_start, jsb.data()});
    }
    for (size_t i = 0; i < out.size(); i += 256) {
      IoBatch batch(&io);
      for (size_t k = i; k < std::min(out.size(), i + 256); k++) batch.write(out[k].first, 1, out[k].second);
      if (int err = batch.wait()) return err;
    }
    if (int err = io.flush()) return err;
    sb.state = STATE_CLEAN;
    sb.orphan_head = 0;
    sb.write_time = int64_t(time(nullptr));
    sb.checksum = superblock_crc(sb);
    std::memset(sbuf.data(), 0, bs);
    std::memcpy(sbuf.data(), &sb, sizeof(sb));
    if (int err = io.write(sb.backup_sb_block, 1, sbuf.data())) return err;
    return io.write(0, 1, sbuf.data(), REQ_PREFLUSH | REQ_FUA);
  }

  // Stops before anything else is written: a failure, or the caller cancelled.
  bool stop() {
    if (!r.fatal && cancelled()) r.cancelled = true;
    return r.fatal || r.cancelled;
  }

  void run() {
    steps();
    flush_lines();
    r.repaired += replayed;
  }

  void steps() {
    if (!superblock() || stop() || !journal() || stop() || !load_inodes()) return;
    inodes();
    if (stop()) return;
    for (uint64_t ino = 1; ino <= sb.inode_count; ino++)
      if (map_dirty[ino] && state[ino] == LIVE) set_map(ino);  // shrinks only: no allocation
    orphan_list();
    for (uint64_t ino = 1; ino <= sb.inode_count && !r.fatal; ino++)
      if (state[ino] == LIVE && S_ISDIR(in(ino).mode)) scan_dir(ino);
    if (stop()) return;
    orphans();
    one_name_per_dir();
    reconnect(unreachable());
    counts();
    bitmaps();
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
};

}  // namespace

FsckResult fsck_repair(BlockIo& io, FsckMode mode, const std::function<void(const std::string&)>& report,
                       const std::atomic<bool>* cancel) {
  if (mode == FsckMode::check) return fsck_check(io, report);
  Repairer rp{io, mode, report, cancel};
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
