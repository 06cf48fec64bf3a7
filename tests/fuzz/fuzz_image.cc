// The fuzz images (mkfs and a short workload on brd, made reproducible), the checksum fixer,
// and exercise_image(): fsck, mount, walk, change, unmount, fsck on whatever bytes it is given.
#include "fuzz_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "fs/crc32c.h"
#include "fs/filesystem.h"
#include "fs/fsck/fsck.h"
#include "fs/mkfs.h"

namespace biofs::fuzz {

using namespace disk;

void property_failed(const std::string& what) {
  fprintf(stderr, "fuzz property failed: %s\n", what.c_str());
  fflush(stderr);
  abort();
}

namespace {
// Set-up that cannot go on (no RAM disk, no bio set): not a finding, but nothing can run.
[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "fuzz set-up failed: %s\n", what.c_str());
  fflush(stderr);
  abort();
}
}  // namespace

namespace {

constexpr uint8_t kUuid[16] = {0xb1, 0x0f, 0x5f, 0x0f, 0x22, 0x33, 0x44, 0x55,
                               0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd};
constexpr uint32_t kHashSeed = 0x5eedf00d;
constexpr uint64_t kJournalSeq = 1000;

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void put(uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

bool known_magic(uint32_t m) {
  switch (m) {
    case BLK_BLOCK_BITMAP: case BLK_INODE_BITMAP: case BLK_EXTENT: case BLK_DIR: case BLK_DIR_INDEX:
    case BLK_XATTR: case BLK_JOURNAL_SB: case BLK_JOURNAL_DESC: case BLK_JOURNAL_COMMIT:
    case BLK_JOURNAL_REVOKE:
      return true;
    default:
      return false;
  }
}

void fix_super(uint8_t* p, bool canonical) {
  SuperBlock sb;
  std::memcpy(&sb, p, sizeof sb);
  if (canonical) {
    sb.mkfs_time = sb.mount_time = sb.write_time = 0;
    std::memcpy(sb.uuid, kUuid, 16);
    sb.hash_seed = kHashSeed;
  }
  sb.checksum = superblock_crc(sb);
  std::memcpy(p, &sb, sizeof sb);
}

// The layout an image's superblock describes, when it is sane enough to walk.
struct Layout {
  SuperBlock sb;
  uint64_t bs = 0, ipb = 0;
  bool in_table(uint64_t b) const { return b >= sb.inode_table_start && b - sb.inode_table_start < sb.inode_table_blocks; }
};

bool region_ok(uint64_t start, uint64_t n, uint64_t count) { return start <= count && n <= count - start; }

bool layout_of(const std::vector<uint8_t>& img, Layout* l) {
  if (img.size() < sizeof(SuperBlock)) return false;
  std::memcpy(&l->sb, img.data(), sizeof(SuperBlock));
  const SuperBlock& sb = l->sb;
  const uint64_t bs = sb.block_size;
  if (bs < MIN_BLOCK_SIZE || bs > MAX_BLOCK_SIZE || (bs & (bs - 1))) return false;
  if (sb.block_count == 0 || sb.block_count > img.size() / bs) return false;
  if (!region_ok(sb.inode_table_start, sb.inode_table_blocks, sb.block_count) ||
      !region_ok(sb.journal_start, sb.journal_blocks, sb.block_count) || sb.journal_blocks < 2)
    return false;
  l->bs = bs;
  l->ipb = bs / INODE_SIZE;
  return true;
}

// Inodes in table block `blk` held at `p` (in place, or a journal copy of it).
void fix_inode_block(const Layout& l, uint64_t blk, uint8_t* p, bool canonical) {
  for (uint64_t slot = 0; slot < l.ipb; slot++) {
    const uint64_t ino = (blk - l.sb.inode_table_start) * l.ipb + slot + 1;
    if (ino > l.sb.inode_count) break;
    Inode in;
    std::memcpy(&in, p + slot * INODE_SIZE, INODE_SIZE);
    if (in.mode == 0) continue;
    if (canonical) {
      in.atime_sec = in.mtime_sec = in.ctime_sec = in.btime_sec = 0;
      in.atime_nsec = in.mtime_nsec = in.ctime_nsec = in.btime_nsec = 0;
    }
    in.checksum = inode_crc(ino, in);
    std::memcpy(p + slot * INODE_SIZE, &in, INODE_SIZE);
  }
}

// Directory entry hashes under the canonical seed (nothing checks them, but they are bytes of
// the image and must not depend on mkfs's random seed); free space, which holds the hashes of
// removed entries, is zeroed.
void rehash_dir(uint8_t* p, uint64_t bs) {
  for (uint64_t off = sizeof(DirBlock); off + sizeof(DirEntry) <= bs;) {
    const uint16_t rec = get<uint16_t>(p + off + offsetof(DirEntry, rec_len));
    if (rec < sizeof(DirEntry) || off + rec > bs) return;
    const uint64_t ino = get<uint64_t>(p + off);
    const uint8_t len = p[off + offsetof(DirEntry, name_len)];
    if (!ino) {
      std::memset(p + off, 0, rec);
      put<uint16_t>(p + off + offsetof(DirEntry, rec_len), rec);
    } else if (dirent_size(len) <= rec) {
      put<uint32_t>(p + off + offsetof(DirEntry, hash),
                    dir_hash(kHashSeed, reinterpret_cast<const char*>(p + off + sizeof(DirEntry)), len));
      std::memset(p + off + sizeof(DirEntry) + len, 0, rec - sizeof(DirEntry) - len);
    }
    off += rec;
  }
}

// A headered block that claims to live at `home`.
void fix_headered(uint8_t* p, uint64_t home, uint64_t bs, bool canonical) {
  const auto* h = reinterpret_cast<const BlockHeader*>(p);
  if (!known_magic(h->magic) || h->blocknr != home) return;
  if (canonical && h->magic == BLK_DIR) rehash_dir(p, bs);
  set_block_crc(p, uint32_t(bs));
}

// A block as it would be at `home`, wherever it is held.
void fix_block_for(const Layout& l, uint64_t home, uint8_t* p, bool canonical) {
  if (home == 0) fix_super(p, canonical);
  else if (l.in_table(home)) fix_inode_block(l, home, p, canonical);
  else fix_headered(p, home, l.bs, canonical);
}

// Walks the journal's transactions from its head: copies are fixed as the blocks they log, the
// commit blocks get their data crc; canonical also shifts the sequence numbers to a fixed base
// and zeroes whatever follows the last well-formed transaction.
void fix_journal(std::vector<uint8_t>& img, const Layout& l, bool canonical) {
  const uint64_t bs = l.bs, js = l.sb.journal_start, jb = l.sb.journal_blocks;
  uint8_t* base = img.data() + js * bs;
  auto* jsb = reinterpret_cast<JournalSuper*>(base);
  if (jsb->h.magic != BLK_JOURNAL_SB) return;
  const uint64_t delta = canonical ? jsb->sequence - kJournalSeq : 0;
  if (canonical) {
    jsb->sequence = kJournalSeq;
    std::memcpy(jsb->uuid, kUuid, 16);
    jsb->h.blocknr = js;
  }
  set_block_crc(base, uint32_t(bs));
  const uint64_t per = journal_targets_per_desc(uint32_t(bs));
  uint64_t pos = jsb->head >= 1 && jsb->head < jb ? jsb->head : 1;
  uint32_t data_crc = 0;
  while (pos < jb) {
    uint8_t* d = base + pos * bs;
    auto* desc = reinterpret_cast<JournalDesc*>(d);
    if (desc->h.magic != BLK_JOURNAL_DESC) break;
    desc->sequence -= delta;
    const uint64_t nr = std::min<uint64_t>({desc->nr, per, jb - pos - 1});
    for (uint64_t i = 0; i < nr; i++) {
      uint8_t* copy = base + (pos + 1 + i) * bs;
      const uint64_t home = get<uint64_t>(d + sizeof(JournalDesc) + i * 8);
      fix_block_for(l, home, copy, canonical);
      data_crc = crc32c(data_crc, copy, bs);
    }
    set_block_crc(d, uint32_t(bs));
    pos += 1 + nr;
    if (!(desc->flags & JDESC_LAST)) continue;
    if (pos >= jb) break;
    uint8_t* c = base + pos * bs;
    auto* commit = reinterpret_cast<JournalCommit*>(c);
    if (commit->h.magic != BLK_JOURNAL_COMMIT) break;
    commit->sequence -= delta;
    if (canonical) commit->commit_sec = 0, commit->commit_nsec = 0;
    commit->data_crc = data_crc;
    set_block_crc(c, uint32_t(bs));
    data_crc = 0;
    pos++;
  }
  if (canonical && pos < jb) std::memset(base + pos * bs, 0, (jb - pos) * bs);
}

}  // namespace

void fix_checksums(std::vector<uint8_t>& img, bool canonical) {
  if (img.size() < sizeof(SuperBlock)) return;
  fix_super(img.data(), canonical);
  Layout l;
  if (!layout_of(img, &l)) return;
  const uint64_t bs = l.bs;
  for (uint64_t b = 1; b < l.sb.block_count; b++) {
    uint8_t* p = img.data() + b * bs;
    if (l.in_table(b)) fix_inode_block(l, b, p, canonical);
    else if (b == l.sb.backup_sb_block && get<uint64_t>(p) == SB_MAGIC) fix_super(p, canonical);
    else fix_headered(p, b, bs, canonical);
  }
  fix_journal(img, l, canonical);
}

std::unique_ptr<BrdDevice> load_device(const std::vector<uint8_t>& img) {
  std::unique_ptr<BrdDevice> dev;
  if (Status s = BrdDevice::create(img.size(), &dev); !s.ok()) die("load_device: " + s.message());
  dev->poke(0, img.data(), img.size());
  return dev;
}

void apply_patches(std::vector<uint8_t>& img, const uint8_t* data, size_t size, unsigned off_bytes,
                   uint64_t lo, uint64_t hi) {
  if (hi <= lo || hi > img.size()) return;
  while (size > off_bytes) {
    uint64_t off = 0;
    for (unsigned i = 0; i < off_bytes; i++) off |= uint64_t(data[i]) << (8 * i);
    const size_t len = std::min<size_t>(data[off_bytes], size - off_bytes - 1);
    data += off_bytes + 1;
    size -= off_bytes + 1;
    off = lo + off % (hi - lo);
    const size_t n = std::min<uint64_t>(len, hi - off);
    std::memcpy(img.data() + off, data, n);
    data += len;
    size -= len;
  }
}

// ---- the workload -----------------------------------------------------------------------------

namespace {

void must(int rc, const char* what) {
  if (rc < 0) property_failed(std::string("fuzz image workload: ") + what + ": " + strerror(-rc));
}

uint64_t make(Filesystem& fs, uint64_t dir, const std::string& name, mode_t mode) {
  struct stat st;
  if (S_ISDIR(mode)) must(fs.mkdir(dir, name, mode & 07777, 0, 0, &st), name.c_str());
  else must(fs.mknod(dir, name, mode, 0, 0, 0, &st), name.c_str());
  return st.st_ino;
}

void fill(Filesystem& fs, uint64_t ino, uint64_t off, size_t len, char c) {
  std::string data(len, c);
  for (size_t i = 0; i < len; i++) data[i] = char(c + i % 7);
  if (fs.write(ino, off, len, data.data()) != ssize_t(len)) property_failed("fuzz image workload: write");
}

}  // namespace

Image make_image(bool crash) {
  std::unique_ptr<BrdDevice> dev_owner;
  if (Status s = BrdDevice::create(IMAGE_BYTES, &dev_owner); !s.ok()) die("make_image: " + s.message());
  BrdDevice& dev = *dev_owner;
  BlockIo io(dev.bdev(), 4096);
  if (int e = io.init(); e) die("make_image: " + bioset_init_error(e));
  MkfsOptions mk;
  mk.block_size = IMAGE_BLOCK;
  mk.inodes = 128;
  mk.force = true;
  if (Status s = make_filesystem(io, mk); !s.ok()) property_failed("fuzz image mkfs: " + s.message());
  MountOptions mo;
  mo.commit_interval_s = 0;
  std::unique_ptr<Filesystem> fs;
  if (Status s = Filesystem::mount(io, mo, &fs); !s.ok()) property_failed("fuzz image mount: " + s.message());
  Image im;
  struct stat st;
  const uint64_t d = make(*fs, ROOT_INO, "d", S_IFDIR | 0755);
  const uint64_t sub = make(*fs, d, "sub", S_IFDIR | 0750);
  make(*fs, sub, "deep", S_IFREG | 0600);
  const uint64_t a = make(*fs, ROOT_INO, "a", S_IFREG | 0644);
  fill(*fs, a, 0, 3000, 'a');
  must(fs->setxattr(a, "user.k", "v1", 0), "setxattr");
  must(fs->setxattr(a, "user.long", std::string(12, 'x'), 0), "setxattr");
  // Two files written alternately block by block: each gets 50 one-block extents, more than a
  // 1 KiB tree node holds, so an index node and two leaves.
  const uint64_t f1 = make(*fs, ROOT_INO, "frag", S_IFREG | 0644);
  const uint64_t f2 = make(*fs, ROOT_INO, "frag2", S_IFREG | 0644);
  for (int i = 0; i < 50; i++) {
    fill(*fs, f1, uint64_t(i) * IMAGE_BLOCK, IMAGE_BLOCK, 'f');
    fill(*fs, f2, uint64_t(i) * IMAGE_BLOCK, IMAGE_BLOCK, 'g');
  }
  must(fs->fallocate(f2, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * IMAGE_BLOCK, 20 * IMAGE_BLOCK), "punch");
  im.frag_ino = f1;
  // A directory of two blocks, with free records left by removals.
  for (int i = 0; i < 60; i++) make(*fs, d, "entry-" + std::to_string(i), S_IFREG | 0644);
  for (int i = 0; i < 60; i += 3) must(fs->unlink(d, "entry-" + std::to_string(i)), "unlink");
  im.subdir_ino = d;
  must(fs->link(a, d, "a-link", &st), "link");
  must(fs->symlink(ROOT_INO, "short", "a", 0, 0, &st), "symlink");
  must(fs->symlink(ROOT_INO, "long", std::string(300, 'L'), 0, 0, &st), "symlink");
  const uint64_t u = make(*fs, ROOT_INO, "unwritten", S_IFREG | 0644);
  must(fs->fallocate(u, 0, 0, 4 * IMAGE_BLOCK), "fallocate");
  fill(*fs, u, IMAGE_BLOCK, 10, 'u');
  make(*fs, ROOT_INO, "fifo", S_IFIFO | 0644);
  must(fs->rename(d, "sub", ROOT_INO, "moved", 0), "rename");
  // Last, so the blocks made before stay where they were: a's attributes spill from the inline
  // area into an external xattr block (one entry stays inline).
  for (int i = 0; i < 6; i++) must(fs->setxattr(a, "user.x" + std::to_string(i), std::string(40 + i, char('p' + i)), 0), "setxattr");
  must(fs->unmount(), "unmount");
  fs.reset();
  if (crash) {
    if (Status s = Filesystem::mount(io, mo, &fs); !s.ok()) property_failed("fuzz image remount: " + s.message());
    const uint64_t o = make(*fs, ROOT_INO, "open-unlinked", S_IFREG | 0644);
    fill(*fs, o, 0, 2 * IMAGE_BLOCK, 'o');
    must(fs->open(o), "open");
    must(fs->unlink(ROOT_INO, "open-unlinked"), "unlink");  // an orphan: still open
    fill(*fs, a, 2000, 3000, 'b');
    make(*fs, sub, "late", S_IFREG | 0644);
    fs->crash_before_checkpoint();
    if (fs->sync() != -EIO) property_failed("fuzz image: the crash commit did not stop before its checkpoint");
    fs->crash();
    fs.reset();
  }
  im.bytes.resize(IMAGE_BYTES);
  dev.peek(0, im.bytes.data(), IMAGE_BYTES);
  fix_checksums(im.bytes, true);
  std::memcpy(&im.sb, im.bytes.data(), sizeof im.sb);
  const SuperBlock& sb = im.sb;
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++) {
    const uint64_t blk = sb.inode_table_start + (ino - 1) / (IMAGE_BLOCK / INODE_SIZE);
    const uint8_t* p = im.bytes.data() + blk * IMAGE_BLOCK + (ino - 1) % (IMAGE_BLOCK / INODE_SIZE) * INODE_SIZE;
    if (get<uint32_t>(p) != 0) im.used_inodes.push_back(ino);
  }
  for (uint64_t b = sb.data_start; b < sb.block_count; b++) {
    const auto* h = reinterpret_cast<const BlockHeader*>(im.bytes.data() + b * IMAGE_BLOCK);
    if (h->blocknr != b) continue;
    const auto* n = reinterpret_cast<const ExtentNode*>(h);
    if (h->magic == BLK_EXTENT && n->owner == f1) {
      if (n->level) im.tree_blocks.insert(im.tree_blocks.begin(), b);  // the root first
      else im.tree_blocks.push_back(b);
    }
    if (h->magic == BLK_DIR) im.dir_blocks.push_back(b);
    if (h->magic == BLK_XATTR && reinterpret_cast<const XattrBlock*>(h)->owner == a) im.xattr_blocks.push_back(b);
  }
  if (im.tree_blocks.size() != 3 || im.dir_blocks.size() < 3 || im.xattr_blocks.size() != 1)
    property_failed("fuzz image: expected a two-level extent tree, several directory blocks and an xattr block");
  return im;
}

const Image& clean_image() {
  static const Image im = make_image(false);
  return im;
}

const Image& crash_image() {
  static const Image im = make_image(true);
  return im;
}

// ---- exercising an image ----------------------------------------------------------------------

namespace {

void one_line(const std::string& s, const char* what) {
  if (s.find('\n') != std::string::npos) property_failed(std::string(what) + " is more than one line: " + s);
}

int run_fsck(BlockIo& io) {
  const FsckResult r = fsck_check(io, [](const std::string& l) { one_line(l, "an fsck report"); });
  return r.fatal ? 8 : r.errors ? 4 : 0;
}

struct Walker {
  Filesystem& fs;
  uint64_t seen = 0;
  std::set<uint64_t> dirs;
  uint64_t some_file = 0, some_dir = 0;
  std::string some_name;

  void file(uint64_t ino, const struct stat& st) {
    static char buf[64 << 10];
    fs.read(ino, 0, sizeof buf, buf);
    if (st.st_size > off_t(sizeof buf)) fs.read(ino, uint64_t(st.st_size) - 4096, 4096, buf);
    fs.lseek(ino, 0, SEEK_DATA);
    fs.lseek(ino, 0, SEEK_HOLE);
  }
  void attrs(uint64_t ino) {
    std::string names, value;
    if (fs.listxattr(ino, &names) != 0) return;
    for (size_t p = 0; p < names.size();) {
      const size_t end = names.find('\0', p);
      if (end == std::string::npos) property_failed("listxattr: names not NUL-terminated");
      fs.getxattr(ino, names.substr(p, end - p), &value);
      p = end + 1;
    }
  }
  void dir(uint64_t ino, unsigned depth) {
    if (depth > 12 || !dirs.insert(ino).second) return;
    std::vector<std::string> names;
    fs.readdir(ino, 0, [&](const std::string& name, uint64_t, unsigned, uint64_t) {
      if (name != "." && name != "..") names.push_back(name);
      return names.size() < 300;
    });
    for (const std::string& name : names) {
      if (++seen > 2000) return;
      struct stat st;
      if (fs.lookup(ino, name, &st) != 0) continue;
      const uint64_t child = st.st_ino;
      fs.getattr(child, &st);
      attrs(child);
      if (S_ISDIR(st.st_mode)) {
        if (!some_dir && child != ROOT_INO) some_dir = child;
        dir(child, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        if (!some_file && ino == ROOT_INO) some_file = child, some_name = name;
        file(child, st);
      } else if (S_ISLNK(st.st_mode)) {
        std::string target;
        fs.readlink(child, &target);
      }
      fs.forget(child, 1);
    }
  }
};

// A few changes of every kind, each allowed to fail (the image may be damaged).
void change_things(Filesystem& fs, Walker& w) {
  struct stat st;
  if (fs.mknod(ROOT_INO, "fz.new", S_IFREG | 0644, 0, 0, 0, &st) == 0) {
    const uint64_t n = st.st_ino;
    std::string data(3000, 'z');
    fs.write(n, 5000, data.size(), data.data());
    fs.setxattr(n, "user.fz", "1", 0);
    struct stat a{};
    a.st_size = 100;
    fs.setattr(n, SETATTR_SIZE, a, &st);
    fs.unlink(ROOT_INO, "fz.new");
    fs.forget(n, 1);
  }
  if (fs.mkdir(ROOT_INO, "fz.dir", 0755, 0, 0, &st) == 0) {
    fs.forget(st.st_ino, 1);
    fs.rename(ROOT_INO, "fz.dir", ROOT_INO, "fz.dir2", 0);
    fs.rmdir(ROOT_INO, "fz.dir2");
  }
  if (w.some_file) {
    std::string data(100, 'w');
    fs.write(w.some_file, 10, data.size(), data.data());
    fs.fallocate(w.some_file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1024, 2048);
    fs.fallocate(w.some_file, 0, 0, 8192);
    if (fs.getattr(w.some_file, &st) == 0) {
      struct stat a{};
      a.st_size = st.st_size / 2;
      fs.setattr(w.some_file, SETATTR_SIZE, a, &st);
    }
    fs.rename(ROOT_INO, w.some_name, ROOT_INO, "fz.moved", 0);
    fs.removexattr(w.some_file, "user.k");
  }
  if (w.some_dir && fs.mknod(w.some_dir, "fz.in", S_IFREG | 0644, 0, 0, 0, &st) == 0) {
    fs.forget(st.st_ino, 1);
    fs.unlink(w.some_dir, "fz.in");
  }
  // A directory moved below another and back: the rename walks up the parent links.
  if (w.some_dir && fs.mkdir(ROOT_INO, "fz.mv", 0755, 0, 0, &st) == 0) {
    fs.forget(st.st_ino, 1);
    if (fs.rename(ROOT_INO, "fz.mv", w.some_dir, "fz.mv", 0) == 0) fs.rename(w.some_dir, "fz.mv", ROOT_INO, "fz.mv", 0);
    fs.rmdir(ROOT_INO, "fz.mv");
  }
  fs.sync();
}

}  // namespace

static std::function<void(const std::vector<uint8_t>&)> image_observer;

void set_image_observer(std::function<void(const std::vector<uint8_t>&)> observer) {
  image_observer = std::move(observer);
}

Outcome exercise_image(const std::vector<uint8_t>& img, bool change) {
  if (image_observer) image_observer(img);
  Outcome o;
  auto dev = load_device(img);
  BlockIo io(dev->bdev(), 4096);
  if (int e = io.init(); e) die(bioset_init_error(e));
  o.fsck_status = run_fsck(io);
  MountOptions mo;
  mo.commit_interval_s = 0;
  mo.meta_cache_bytes = 1 << 20;
  mo.read_only = !change;
  std::unique_ptr<Filesystem> fs;
  if (Status s = Filesystem::mount(io, mo, &fs); !s.ok()) {
    const std::string& err = s.message();
    if (err.empty()) property_failed("a mount failed without saying why");
    one_line(err, "a mount error");
    o.mount_error = err;
    return o;
  }
  struct stat st;
  if (fs->getattr(ROOT_INO, &st) != 0 || !S_ISDIR(st.st_mode)) property_failed("mounted, but the root is not a directory");
  Walker w{*fs};
  w.dir(ROOT_INO, 0);
  o.walked = w.seen;
  if (change) change_things(*fs, w);
  o.unmount_status = fs->unmount();
  fs.reset();
  o.fsck_after = run_fsck(io);
  return o;
}

}  // namespace biofs::fuzz
