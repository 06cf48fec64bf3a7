// The biofs on-disk format (docs/format.md is the prose version; keep them in step). Every
// integer is little-endian; every structure has a fixed size checked below. Every metadata
// structure carries a crc32c, so corruption is detected rather than trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace biofs {
class BlockIo;
}

namespace biofs::disk {

// ---- identity and versions ----------------------------------------------------------------
inline constexpr uint64_t SB_MAGIC = 0x31425373666f6962ull;  // the bytes "biofsSB1"
inline constexpr uint32_t VERSION = 1;

// Feature flags. incompat: a reader that does not know a bit must refuse to mount; ro_compat:
// it may mount read-only; compat: it may ignore it.
inline constexpr uint32_t FEATURE_COMPAT_DIR_INDEX_HINT = 1u << 0;  // reserved
inline constexpr uint32_t FEATURE_INCOMPAT_JOURNAL = 1u << 0;       // metadata journal present
inline constexpr uint32_t FEATURE_INCOMPAT_EXTENT_TREE = 1u << 1;   // extent tree blocks used
inline constexpr uint32_t FEATURE_INCOMPAT_DIR_HTREE = 1u << 2;     // hashed directory index
inline constexpr uint32_t FEATURE_INCOMPAT_INLINE_XATTR = 1u << 3;
// Inodes may have an external xattr block (INODE_XATTR_BLOCK): set by mkfs, and by the first
// attribute that spills on an older image (a reader without it would miss the block, could
// write inline entries over its address, and its fsck would free it).
inline constexpr uint32_t FEATURE_INCOMPAT_XATTR_BLOCK = 1u << 4;
// Extent trees may have index levels below the root (a root of level 2 or more): set by the
// first such tree (a reader that knows only a root over leaves would call it damaged).
inline constexpr uint32_t FEATURE_INCOMPAT_DEEP_EXTENTS = 1u << 5;
inline constexpr uint32_t FEATURE_INCOMPAT_KNOWN = FEATURE_INCOMPAT_JOURNAL |
                                                   FEATURE_INCOMPAT_EXTENT_TREE |
                                                   FEATURE_INCOMPAT_DIR_HTREE |
                                                   FEATURE_INCOMPAT_INLINE_XATTR |
                                                   FEATURE_INCOMPAT_XATTR_BLOCK |
                                                   FEATURE_INCOMPAT_DEEP_EXTENTS;
inline constexpr uint32_t FEATURE_RO_COMPAT_KNOWN = 0;

inline constexpr uint32_t STATE_CLEAN = 1;   // unmounted cleanly: counts in the superblock exact
inline constexpr uint32_t STATE_DIRTY = 2;   // mounted, or crashed while mounted
inline constexpr uint32_t STATE_ERROR = 4;   // an error was seen: run fsck

inline constexpr uint32_t MIN_BLOCK_SIZE = 1024;
inline constexpr uint32_t MAX_BLOCK_SIZE = 65536;
inline constexpr uint32_t DEFAULT_BLOCK_SIZE = 4096;
inline constexpr uint32_t INODE_SIZE = 256;
inline constexpr uint64_t ROOT_INO = 1;  // FUSE_ROOT_ID: the root needs no translation
inline constexpr uint32_t MAX_NAME_LEN = 255;

// ---- superblock: 512 bytes at byte 0 of block 0; the backup in the last block --------------
struct SuperBlock {
  uint64_t magic;                // SB_MAGIC
  uint32_t version;              // VERSION
  uint32_t sb_size;              // sizeof(SuperBlock)
  uint32_t feature_compat;
  uint32_t feature_incompat;
  uint32_t feature_ro_compat;
  uint32_t block_size;           // power of two, MIN_BLOCK_SIZE..MAX_BLOCK_SIZE
  uint64_t block_count;          // blocks in the filesystem (the device may be larger)
  uint64_t inode_count;          // inode slots in the table
  uint64_t free_blocks;          // exact when state == STATE_CLEAN, a hint otherwise
  uint64_t free_inodes;
  uint64_t block_bitmap_start;   // block number of the first block-bitmap block
  uint64_t block_bitmap_blocks;
  uint64_t inode_bitmap_start;
  uint64_t inode_bitmap_blocks;
  uint64_t inode_table_start;
  uint64_t inode_table_blocks;
  uint64_t journal_start;        // the journal superblock; journal_blocks in all
  uint64_t journal_blocks;
  uint64_t data_start;           // first block the allocator hands out
  uint64_t backup_sb_block;      // block_count - 1
  uint64_t root_ino;             // ROOT_INO
  uint64_t orphan_head;          // first inode on the orphan list (unlinked while open), 0: none
  uint32_t inode_size;           // INODE_SIZE
  uint32_t state;                // STATE_*
  uint32_t mount_count;
  uint32_t max_mount_count;      // 0: no forced fsck
  int64_t mkfs_time;             // seconds since the epoch
  int64_t mount_time;
  int64_t write_time;
  uint8_t uuid[16];
  char label[64];                // NUL-padded
  uint32_t hash_seed;            // seeds the directory name hash
  uint8_t reserved[508 - 284];      // zero
  uint32_t checksum;             // crc32c of the 508 bytes before it
};
static_assert(sizeof(SuperBlock) == 512);
static_assert(offsetof(SuperBlock, checksum) == 508);

// ---- every other metadata block starts with this header --------------------------------------
// crc: crc32c over the whole block with the crc field zero, seeded with the superblock's
// hash_seed-independent constant 0 (the blocknr field is what ties a block to its place: a block
// written to the wrong address fails its check).
struct BlockHeader {
  uint32_t magic;     // BLK_* below
  uint32_t crc;
  uint64_t blocknr;   // where this block lives
};
static_assert(sizeof(BlockHeader) == 16);

inline constexpr uint32_t BLK_BLOCK_BITMAP = 0x504d4242;  // "BBMP"
inline constexpr uint32_t BLK_INODE_BITMAP = 0x504d4249;  // "IBMP"
inline constexpr uint32_t BLK_EXTENT = 0x54584542;        // "BEXT"
inline constexpr uint32_t BLK_DIR = 0x52494442;           // "BDIR"
inline constexpr uint32_t BLK_DIR_INDEX = 0x58444942;     // "BIDX" (htree node; format only)
inline constexpr uint32_t BLK_XATTR = 0x52545842;         // "BXTR" (external xattr block)
inline constexpr uint32_t BLK_JOURNAL_SB = 0x42534a42;    // "BJSB"
inline constexpr uint32_t BLK_JOURNAL_DESC = 0x43444a42;  // "BJDC"
inline constexpr uint32_t BLK_JOURNAL_COMMIT = 0x4d434a42;  // "BJCM"
inline constexpr uint32_t BLK_JOURNAL_REVOKE = 0x56524a42;  // "BJRV" (format only)

// Bitmaps: bit i of the payload (byte i/8, bit i%8) set = block (or inode) in use.
inline constexpr uint32_t bitmap_bits_per_block(uint32_t block_size) {
  return (block_size - uint32_t(sizeof(BlockHeader))) * 8;
}
// Whether bit i of a bitmap block's bits (after its header) is set: in use.
inline bool bitmap_bit(const uint8_t* bits, uint64_t i) { return bits[i / 8] & (1u << (i % 8)); }

// ---- inodes: INODE_SIZE bytes each, inode number n in slot n-1 of the table ------------------
// Table blocks have no header: each inode has its own crc (seeded with its number, so an inode
// copied to the wrong slot fails).
struct Extent {
  uint64_t lblk;    // first file block
  uint64_t pblk;    // first device block
  uint32_t len;     // blocks
  uint32_t flags;   // EXTENT_UNWRITTEN: allocated, reads as zeros (fallocate)
};
static_assert(sizeof(Extent) == 24);
inline constexpr uint32_t EXTENT_UNWRITTEN = 1;
// A file's size stops short of this many blocks (16 TiB at 4 KiB, as ext4's): EFBIG beyond.
inline constexpr uint64_t MAX_FILE_BLOCKS = 1ull << 40;

inline constexpr unsigned INLINE_EXTENTS = 4;
inline constexpr unsigned INLINE_XATTR_BYTES = 36;

// flags
inline constexpr uint32_t INODE_EXTENT_TREE = 1u << 0;   // extent_root names a tree, not unused
inline constexpr uint32_t INODE_INLINE_DATA = 1u << 1;   // the extent area holds the data (symlinks)
inline constexpr uint32_t INODE_ORPHAN = 1u << 2;        // on the orphan list
inline constexpr uint32_t INODE_DIR_HTREE = 1u << 3;     // directory block 0 is an htree root
inline constexpr uint32_t INODE_XATTR_BLOCK = 1u << 4;   // xattr[28..35]: the external xattr block
// chattr's flags (attr_flags.h): ext4's IMMUTABLE, APPEND, NODUMP, NOATIME.
inline constexpr uint32_t INODE_IMMUTABLE = 1u << 5;
inline constexpr uint32_t INODE_APPEND = 1u << 6;
inline constexpr uint32_t INODE_NODUMP = 1u << 7;
inline constexpr uint32_t INODE_NOATIME = 1u << 8;

struct Inode {
  uint32_t mode;       // S_IFMT type and permission bits; 0: free slot
  uint32_t uid;
  uint32_t gid;
  uint32_t nlink;
  uint64_t size;       // bytes
  uint64_t blocks;     // fs blocks allocated to the inode (data, tree and xattr blocks)
  int64_t atime_sec, mtime_sec, ctime_sec, btime_sec;
  uint32_t atime_nsec, mtime_nsec, ctime_nsec, btime_nsec;
  uint32_t flags;      // INODE_*
  uint32_t generation;
  uint64_t extent_root;  // with INODE_EXTENT_TREE: root block of the extent tree
  uint16_t nr_extents;   // extents used in `extents` (inline) — with a tree: 0
  uint16_t xattr_len;    // bytes used in xattr
  uint32_t rdev;         // device number for block/char special files
  uint64_t next_orphan;  // orphan list link
  union {
    Extent extents[INLINE_EXTENTS];   // sorted by lblk, non-overlapping
    char inline_data[INLINE_EXTENTS * sizeof(Extent)];  // INODE_INLINE_DATA: short symlink target
  };
  uint64_t parent;                    // directories: the parent's inode number (".." and fsck)
  uint8_t xattr[INLINE_XATTR_BYTES];  // entries: u8 name_len, u8 value_len, name, value
                                      // (INODE_XATTR_BLOCK: 28 bytes of them, then a u64 block)
  uint32_t checksum;                  // crc32c(ino as 8 bytes, then the 252 bytes before this)
};
static_assert(sizeof(Inode) == INODE_SIZE);
static_assert(offsetof(Inode, checksum) == INODE_SIZE - 4);

// ---- the external xattr block ----------------------------------------------------------------
// One per inode at most, never shared. With INODE_XATTR_BLOCK the last 8 bytes of the inline
// area hold its address, so the inline entries get 28 bytes. The block: this header, then
// `used` bytes of entries (u8 name_len > 0, u8 reserved 0, u16 value_len, name, value; packed,
// unaligned), zeros to the end. At least one entry: a block with none is freed.
inline constexpr unsigned INLINE_XATTR_BYTES_WITH_BLOCK = INLINE_XATTR_BYTES - 8;
struct XattrBlock {
  BlockHeader h;     // BLK_XATTR
  uint64_t owner;    // inode number
  uint32_t used;     // bytes of entries after this header
  uint32_t reserved; // zero
};
static_assert(sizeof(XattrBlock) == 32);
inline constexpr uint32_t XATTR_BLOCK_ENTRY_HEAD = 4;  // name_len, reserved, value_len
inline constexpr uint32_t xattr_block_room(uint32_t block_size) { return block_size - uint32_t(sizeof(XattrBlock)); }

// ---- extent tree blocks ----------------------------------------------------------------------
// level 0: leaf, entries are Extent; level > 0: index, entries are ExtentIndex (child covers
// file blocks from its lblk to the next entry's lblk). Entries sorted by lblk.
struct ExtentNode {
  BlockHeader h;       // BLK_EXTENT
  uint64_t owner;      // inode number
  uint16_t level;
  uint16_t nr;
  uint16_t max;        // (block_size - 32) / 24
  uint16_t reserved;
};
static_assert(sizeof(ExtentNode) == 32);
struct ExtentIndex {
  uint64_t lblk;
  uint64_t child;
  uint64_t reserved;
};
static_assert(sizeof(ExtentIndex) == 24);
inline constexpr uint32_t extents_per_node(uint32_t block_size) { return (block_size - 32) / 24; }
inline constexpr uint16_t MAX_EXTENT_DEPTH = 5;  // index levels at most (EXT4_MAX_EXTENT_DEPTH)

// ---- directories -----------------------------------------------------------------------------
// A directory's data blocks (extent-mapped as a file's) each hold a DirBlock header and then
// DirEntry records that tile the rest of the block exactly (rec_len chain, as ext2). A record
// with ino 0 is free space. Names are not NUL-terminated.
struct DirBlock {
  BlockHeader h;     // BLK_DIR
  uint64_t owner;    // directory inode number
};
static_assert(sizeof(DirBlock) == 24);
struct DirEntry {
  uint64_t ino;
  uint32_t hash;      // name hash (dir_hash): lets lookup skip most names without comparing
  uint16_t rec_len;   // bytes to the next record, multiple of 8
  uint8_t name_len;
  uint8_t type;       // DT_* value (as readdir's d_type)
  // char name[name_len], padded
};
static_assert(sizeof(DirEntry) == 16);
inline constexpr uint32_t dirent_size(uint32_t name_len) { return (16 + name_len + 7) & ~7u; }

// ---- journal ---------------------------------------------------------------------------------
// Blocks journal_start .. journal_start + journal_blocks - 1. Block 0 of the journal is its
// superblock; transactions start at `head` (journal-relative) and are laid out as
//   descriptor, the logged copies it lists, [more descriptor + copies], commit
// A transaction counts only if its commit block is intact and its crc over every logged copy
// matches. Replay walks transactions from `head` with sequence `sequence`, +1 each, and stops at
// the first one that is missing or broken.
struct JournalSuper {
  BlockHeader h;        // BLK_JOURNAL_SB
  uint64_t sequence;    // sequence number of the first transaction to replay
  uint64_t head;        // journal-relative block of that transaction (>= 1)
  uint32_t block_size;
  uint32_t flags;
  uint8_t uuid[16];     // the filesystem's: a journal from another fs never replays
};
static_assert(sizeof(JournalSuper) == 56);
struct JournalDesc {
  BlockHeader h;        // BLK_JOURNAL_DESC
  uint64_t sequence;
  uint32_t nr;          // targets in this descriptor
  uint32_t flags;       // JDESC_LAST: no descriptor follows in this transaction
  // uint64_t targets[nr]: home block of each logged copy, in order
};
static_assert(sizeof(JournalDesc) == 32);
inline constexpr uint32_t JDESC_LAST = 1;
inline constexpr uint32_t journal_targets_per_desc(uint32_t block_size) { return (block_size - 32) / 8; }
struct JournalCommit {
  BlockHeader h;        // BLK_JOURNAL_COMMIT
  uint64_t sequence;
  uint32_t nr_blocks;   // logged copies in the transaction
  uint32_t data_crc;    // crc32c chained over the logged copies in order
  int64_t commit_sec;
  uint32_t commit_nsec;
  uint32_t reserved;
};
static_assert(sizeof(JournalCommit) == 48);

// ---- helpers (format.cc) -----------------------------------------------------------------------
uint32_t superblock_crc(const SuperBlock& sb);
uint32_t inode_crc(uint64_t ino, const Inode& in);
void set_block_crc(void* block, uint32_t block_size);   // fills BlockHeader::crc
bool block_crc_ok(const void* block, uint32_t block_size);
// A metadata block read from `blocknr` is what it should be: its magic, its block number, its crc.
bool block_header_ok(const void* block, uint32_t block_size, uint32_t magic, uint64_t blocknr);
uint32_t dir_hash(uint32_t seed, const char* name, size_t len);

// The readdir type (DT_*) of an inode of this mode: the S_IFMT bits shifted down, as the
// kernel's fs_umode_to_dtype.
inline constexpr uint8_t dirent_type(uint32_t mode) { return uint8_t((mode >> 12) & 0xF); }
// The record at byte `off` of a directory block (block_size bytes at `block`) fits the chain:
// its header inside the block, rec_len at least a header, a multiple of 8, not past the end.
bool dir_record_fits(const void* block, uint32_t block_size, uint32_t off);

// An extent tree node (a block that passed block_header_ok) is consistent: `owner`'s, no more
// entries than a node holds, a level of MAX_EXTENT_DEPTH at most (below it for a non-root).
bool extent_node_ok(const ExtentNode& n, uint64_t owner, uint32_t block_size, bool root);
// The tree blocks a map of `extents` extents takes packed full (fsck's rewrite, mkfs): none up
// to INLINE_EXTENTS (they live in the inode), else its leaves and the index over them.
uint64_t extent_tree_blocks(uint64_t extents, uint32_t block_size);

// The longest size a symlink inode may have: its inline data, or what readlink accepts (4095).
inline uint64_t symlink_max_size(const Inode& d) {
  return (d.flags & INODE_INLINE_DATA) ? sizeof(d.inline_data) : 4095;
}

// Checks a superblock read from disk: "" if it is usable, else one line saying why not.
// device_bytes: the device size (0: do not check it).
std::string check_superblock(const SuperBlock& sb, uint64_t device_bytes);
// `backup` (read from primary.backup_sb_block) is a usable superblock of the same filesystem.
bool backup_superblock_ok(const SuperBlock& backup, const SuperBlock& primary, uint64_t device_bytes);
// Checks the journal superblock (sb.block_size bytes at `block`, read from sb.journal_start):
// one line per problem, none when it is usable. A block failing its header check has no
// other problem named; otherwise another filesystem's uuid and a head out of range each are.
std::vector<std::string> check_journal_super(const void* block, const SuperBlock& sb);
// Fills `block` (sb.block_size bytes, zeroed) as the superblock of an empty journal whose first
// transaction will have `sequence`, its crc set.
void make_journal_super(void* block, const SuperBlock& sb, uint64_t sequence);
// A first sequence number for a fresh journal: random, so blocks left by an earlier journal
// never match it.
uint64_t fresh_journal_sequence();

// ---- reading the superblock (format.cc: the one place here that does I/O) ---------------------
// Reads and checks the primary superblock, falling back to the backup when the primary is
// damaged but still says biofs and `use_backup` (a device whose magic is gone may hold another
// filesystem). io's block size is left as it was. "" or one line saying why not.
std::string read_superblock(BlockIo& io, SuperBlock* sb, bool use_backup = true);
// A valid backup superblock in the last block of the device, for each legal block size in turn;
// false when there is none. Also where the primary's magic is gone: what a repair asked for
// (fsck -y) may look for.
bool find_backup_superblock(BlockIo& io, SuperBlock* sb);

}  // namespace biofs::disk
