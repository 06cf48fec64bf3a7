#include "fsck.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "extent_tree.h"
#include "format.h"
#include "fsck_read.h"
#include "journal.h"
#include "xattr_block.h"
#include "lib/printable.h"

namespace biofs {

using namespace disk;

namespace {

struct Checker {
  BlockIo& io;
  const std::function<void(const std::string&)>& report;
  SuperBlock sb{};
  FsckResult r;
  uint32_t bs = 0;
  std::vector<uint8_t> owned;      // per block: 0 free, 1 owned (metadata or an inode)
  std::vector<uint32_t> refs;      // per inode: directory entries naming it
  std::vector<uint32_t> subdirs;   // per directory inode: subdirectories
  std::vector<uint64_t> parent_of; // per directory inode: the directory that names it
  IoBuf table;                     // the whole inode table
  std::vector<uint8_t> orphan;     // per inode: on the orphan list

  const Inode& inode(uint64_t ino) const { return fsck::table_inode(table, ino); }

  void error(const std::string& s) {
    r.errors++;
    report(s);
  }
  bool read(uint64_t blk, uint32_t n, void* buf) {
    if (int err = io.read(blk, n, buf)) {
      error(fsck::read_failed(blk, err));
      return false;
    }
    return true;
  }
  // Marks [start, start+n) owned by `who`; reports blocks outside the data area or owned twice.
  void own(uint64_t start, uint64_t n, const std::string& who) {
    for (uint64_t b = start; b < start + n; b++) {
      if (b < sb.data_start || b >= sb.block_count - 1) {
        error(who + " claims block " + std::to_string(b) + " outside the data area");
        return;
      }
      if (owned[b]) error("block " + std::to_string(b) + " is claimed twice (again by " + who + ")");
      owned[b] = 1;
      r.blocks_used++;
    }
  }
  bool headered(uint64_t blk, uint32_t magic, std::vector<uint8_t>& buf, const std::string& what) {
    buf.assign(bs, 0);
    IoBuf tmp(bs);
    if (!read(blk, 1, tmp.data())) return false;
    std::memcpy(buf.data(), tmp.data(), bs);
    if (!block_header_ok(buf.data(), bs, magic, blk)) {
      error(what + " (block " + std::to_string(blk) + ") fails its checksum or header check");
      return false;
    }
    return true;
  }

  void run() {
    io.set_block_size(4096);
    std::string why = read_superblock(io, &sb, false);
    if (!why.empty()) {
      error("primary superblock: " + why);
      if (!read_superblock(io, &sb, true).empty()) {
        r.fatal = true;
        return;
      }
      report("using the backup superblock");
    }
    bs = sb.block_size;
    io.set_block_size(bs);
    // The backup must be a valid superblock of the same filesystem.
    {
      IoBuf b(bs);
      if (read(sb.backup_sb_block, 1, b.data())) {
        SuperBlock bk;
        std::memcpy(&bk, b.data(), sizeof(bk));
        if (!backup_superblock_ok(bk, sb, io.device_bytes())) error("backup superblock is damaged");
      }
    }
    if (sb.state != STATE_CLEAN) {
      r.warnings++;
      report("filesystem was not cleanly unmounted");
    }
    owned.assign(sb.block_count, 0);
    for (uint64_t b = 0; b < sb.data_start; b++) owned[b] = 1;
    owned[sb.backup_sb_block] = 1;
    check_journal();
    load_inodes();
    check_orphans();
    check_inodes();
    check_tree();
    check_bitmaps();
  }

  void check_journal() {
    IoBuf buf(bs);
    if (!read(sb.journal_start, 1, buf.data())) return;
    const std::vector<std::string> problems = check_journal_super(buf.data(), sb);
    for (const std::string& p : problems) error(p);
    if (!problems.empty()) return;  // recover() stops at the same problems: nothing to replay
    Journal journal(io, sb);
    int complete = 0;
    journal.recover(&complete, false);  // a dry run: reads only
    if (complete) {
      r.warnings++;
      report("journal holds a committed transaction that mounting will replay (checked as the disk is now)");
    }
  }

  void load_inodes() {
    if (!fsck::read_inode_table(sb, [&](uint64_t blk, uint32_t n, void* buf) { return read(blk, n, buf); }, &table))
      r.fatal = true;
  }

  // The orphan list: inodes unlinked while open, freed at the next mount.
  void check_orphans() {
    if (r.fatal) return;
    orphan.assign(sb.inode_count + 1, 0);
    const std::string bad = fsck::walk_orphan_list(
        sb, table, [&](uint64_t p) { return inode(p).mode != 0; },
        [&](uint64_t p) {
          orphan[p] = 1;
          r.warnings++;
          report("inode " + std::to_string(p) + " is an orphan (unlinked while open): the next mount frees it");
        });
    if (!bad.empty()) error(bad);
  }

  // The extents of inode `ino` (inline or from its tree; tree blocks are claimed here and
  // counted in *tree_blocks).
  bool extents_of(uint64_t ino, const Inode& d, std::vector<Extent>* out, uint64_t* tree_blocks) {
    const std::string who = "inode " + std::to_string(ino);
    *tree_blocks = 0;
    if (d.flags & INODE_INLINE_DATA) return true;
    if (!(d.flags & INODE_EXTENT_TREE)) {
      if (d.nr_extents > INLINE_EXTENTS) {
        error(who + " has " + std::to_string(d.nr_extents) + " inline extents");
        return false;
      }
      out->assign(d.extents, d.extents + d.nr_extents);
      return true;
    }
    std::vector<uint8_t> buf;
    bool reported = false;  // headered() reported the block itself
    const ExtentBlockReader read = [&](uint64_t blk, std::string* why) -> const uint8_t* {
      if (blk >= sb.block_count) {
        *why = "extent tree block " + std::to_string(blk) + " is outside the filesystem";
        return nullptr;
      }
      if (!headered(blk, BLK_EXTENT, buf, who + " extent tree block")) {
        reported = true;
        return nullptr;
      }
      own(blk, 1, who + " (extent tree)");
      return buf.data();
    };
    ExtentTreeShape shape;
    const std::string why = read_extent_tree(d.extent_root, ino, bs, read, out, &shape);
    if (!why.empty()) {
      if (!reported) error(who + " " + why);
      return false;
    }
    *tree_blocks = shape.blocks();
    if (shape.index.size() != extent_index_blocks(shape.leaves.size(), extents_per_node(bs)))
      error(who + " extent tree has " + std::to_string(shape.index.size()) + " index blocks over " +
            std::to_string(shape.leaves.size()) + " leaves");
    if (shape.index.size() > 1 && !(sb.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS))
      error(who + " extent tree is deeper than a root over leaves: the superblock lacks the deep extent feature");
    return true;
  }

  // Inode `ino`'s external xattr block, claimed for it: its address, header, crc, owner and
  // entries (xattr_block.cc, as xattr.cc reads it). The blocks it adds to the inode's count (1
  // even when damaged: the count is right, the block is not).
  uint64_t check_xattr_block(uint64_t ino, const Inode& d) {
    const uint64_t blk = xattr::block_of(d);
    if (!blk) return 0;
    const std::string who = "inode " + std::to_string(ino) + " xattr block " + std::to_string(blk);
    if (!(sb.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK))
      error(who + ": the superblock lacks the xattr block feature");
    if (blk < sb.data_start || blk >= sb.block_count - 1) {
      error(who + " is outside the data area");
      return 1;
    }
    own(blk, 1, "inode " + std::to_string(ino) + " (xattr block)");
    IoBuf buf(bs);
    if (!read(blk, 1, buf.data())) return 1;
    const xattr::ParsedBlock p = xattr::parse_block(buf.data(), bs, blk, ino, true);
    if (p.state != xattr::BlockState::ok) error(who + " " + p.why);
    else if (p.attrs.empty()) error(who + " holds no entries");
    return 1;
  }

  void check_inodes() {
    if (r.fatal) return;
    refs.assign(sb.inode_count + 1, 0);
    subdirs.assign(sb.inode_count + 1, 0);
    parent_of.assign(sb.inode_count + 1, 0);
    for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
      const Inode& d = inode(ino);
      if (d.mode == 0) continue;
      const std::string who = "inode " + std::to_string(ino);
      if (inode_crc(ino, d) != d.checksum) {
        error(who + " fails its checksum");
        continue;
      }
      r.inodes++;
      if ((d.flags & INODE_INLINE_DATA) && !S_ISLNK(d.mode)) error(who + " is not a symlink but has inline data");
      // The inline area holds whole entries only, as xattr.cc reads it.
      if (!xattr::inline_sound(d)) error(who + " inline xattr area is damaged");
      const uint64_t xattr_blocks = check_xattr_block(ino, d);
      if (S_ISLNK(d.mode) && d.size > symlink_max_size(d))
        error("symlink " + std::to_string(ino) + " has size " + std::to_string(d.size) + ", longer than its target can be");
      std::vector<Extent> ext;
      uint64_t tree_blocks;
      if (!extents_of(ino, d, &ext, &tree_blocks)) continue;
      uint64_t blocks = 0;
      uint64_t prev_end = 0;
      for (const Extent& e : ext) {
        if (e.len == 0 || e.lblk < prev_end) error(who + " has overlapping or empty extents");
        if (e.flags & ~EXTENT_UNWRITTEN) error(who + " has an extent with unknown flags");
        prev_end = e.lblk + e.len;
        own(e.pblk, e.len, who);
        blocks += e.len;
      }
      // blocks counts data and tree blocks.
      if (d.blocks != blocks + tree_blocks + xattr_blocks)
        error(who + " says " + std::to_string(d.blocks) + " blocks but owns " +
              std::to_string(blocks + tree_blocks + xattr_blocks));
      if (S_ISDIR(d.mode)) {
        r.dirs++;
        check_dir(ino, d, ext);
      }
    }
  }

  void check_dir(uint64_t ino, const Inode& d, const std::vector<Extent>& ext) {
    const std::string who = "directory " + std::to_string(ino);
    if (d.size % bs) {
      error(who + " size is not a multiple of the block size");
      return;
    }
    uint64_t mapped = 0;
    for (const Extent& e : ext) mapped += e.len;
    if (d.size / bs > std::min(mapped, sb.block_count)) {  // also bounds the walk below
      error(who + " size " + std::to_string(d.size) + " is more than its " + std::to_string(mapped) + " blocks hold");
      return;
    }
    for (uint64_t lblk = 0; lblk < d.size / bs; lblk++) {
      uint64_t pblk = 0;
      for (const Extent& e : ext)
        if (lblk >= e.lblk && lblk < e.lblk + e.len) pblk = e.pblk + (lblk - e.lblk);
      std::vector<uint8_t> buf;
      if (!pblk) {
        error(who + " has a hole at block " + std::to_string(lblk));
        continue;
      }
      if (!headered(pblk, BLK_DIR, buf, who + " block " + std::to_string(lblk))) continue;
      if (reinterpret_cast<const DirBlock*>(buf.data())->owner != ino) error(who + " block " + std::to_string(lblk) + " belongs to another inode");
      for (uint32_t off = sizeof(DirBlock); off < bs;) {
        const auto* e = reinterpret_cast<const DirEntry*>(buf.data() + off);
        if (!dir_record_fits(buf.data(), bs, off)) {
          error(who + " block " + std::to_string(lblk) + " has a broken entry chain");
          break;
        }
        if (e->ino) {
          const std::string name = printable({reinterpret_cast<const char*>(e + 1), std::min<size_t>(e->name_len, e->rec_len - 16)});
          if (e->ino > sb.inode_count || inode(e->ino).mode == 0) {
            error(who + " entry '" + name + "' names free inode " + std::to_string(e->ino));
          } else {
            const Inode& t = inode(e->ino);
            refs[e->ino]++;
            if (e->type != dirent_type(t.mode)) error(who + " entry '" + name + "' has the wrong type");
            if (S_ISDIR(t.mode)) {
              subdirs[ino]++;
              parent_of[e->ino] = ino;
              if (t.parent != ino) error("directory " + std::to_string(e->ino) + " ('" + name + "') names parent " + std::to_string(t.parent) + ", not " + std::to_string(ino));
            }
          }
        }
        off += e->rec_len;
      }
    }
  }

  void check_tree() {
    if (r.fatal) return;
    for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
      const Inode& d = inode(ino);
      if (d.mode == 0 || inode_crc(ino, d) != d.checksum) continue;
      const std::string who = "inode " + std::to_string(ino);
      if (orphan[ino] && d.nlink == 0 && refs[ino] == 0) continue;  // freed at the next mount
      if (S_ISDIR(d.mode)) {
        if (ino != ROOT_INO && refs[ino] != 1) error("directory " + std::to_string(ino) + " is named by " + std::to_string(refs[ino]) + " entries");
        if (d.nlink != 2 + subdirs[ino]) error(who + " link count " + std::to_string(d.nlink) + ", should be " + std::to_string(2 + subdirs[ino]));
      } else if (refs[ino] == 0) {
        error(who + " is in use but in no directory (lost)");
      } else if (d.nlink != refs[ino]) {
        error(who + " link count " + std::to_string(d.nlink) + ", should be " + std::to_string(refs[ino]));
      }
    }
    if (!S_ISDIR(inode(ROOT_INO).mode)) error("the root inode is not a directory");
  }

  void check_bitmaps() {
    if (r.fatal) return;
    const uint64_t bpb = bitmap_bits_per_block(bs);
    uint64_t free_blocks = 0, free_inodes = 0, wrong = 0;
    for (uint64_t i = 0; i < sb.block_bitmap_blocks; i++) {
      std::vector<uint8_t> buf;
      if (!headered(sb.block_bitmap_start + i, BLK_BLOCK_BITMAP, buf, "block bitmap")) continue;
      const uint8_t* bits = buf.data() + sizeof(BlockHeader);
      for (uint64_t k = 0; k < bpb && i * bpb + k < sb.block_count; k++) {
        const uint64_t b = i * bpb + k;
        const bool set = bits[k / 8] & (1u << (k % 8));
        free_blocks += !set;
        if (set != bool(owned[b])) {
          if (wrong++ < 20)
            error(set ? "block " + std::to_string(b) + " is marked in use but nothing owns it"
                      : "block " + std::to_string(b) + " is in use but marked free");
          else
            r.errors++;
        }
      }
    }
    wrong = 0;
    for (uint64_t i = 0; i < sb.inode_bitmap_blocks; i++) {
      std::vector<uint8_t> buf;
      if (!headered(sb.inode_bitmap_start + i, BLK_INODE_BITMAP, buf, "inode bitmap")) continue;
      const uint8_t* bits = buf.data() + sizeof(BlockHeader);
      for (uint64_t k = 0; k < bpb && i * bpb + k < sb.inode_count; k++) {
        const uint64_t ino = i * bpb + k + 1;
        const bool set = bits[k / 8] & (1u << (k % 8));
        free_inodes += !set;
        if (set != (inode(ino).mode != 0)) {
          if (wrong++ < 20)
            error(set ? "inode " + std::to_string(ino) + " is marked in use but free"
                      : "inode " + std::to_string(ino) + " is in use but marked free");
          else
            r.errors++;
        }
      }
    }
    if (sb.state == STATE_CLEAN && (sb.free_blocks != free_blocks || sb.free_inodes != free_inodes))
      error("superblock free counts (" + std::to_string(sb.free_blocks) + " blocks, " + std::to_string(sb.free_inodes) +
            " inodes) differ from the bitmaps (" + std::to_string(free_blocks) + ", " + std::to_string(free_inodes) + ")");
  }
};

}  // namespace

FsckResult fsck_check(BlockIo& io, const std::function<void(const std::string&)>& report) {
  Checker c{io, report};
  c.run();
  return c.r;
}

}  // namespace biofs
