// Extended attributes as bytes: the inode's inline area and the external xattr block (BXTR,
// format.h), parsed with every bound checked, packed, and the choice of which attributes live
// where. No I/O: the filesystem (xattr.cc), fsck and the fuzz harnesses share it.
// Kernel twins (fs/ext4/xattr.c): ext4_xattr_check_block / check_xattrs (parse_block),
// ext4_xattr_set_entry (pack_*); ext4 fills the inode body first and spills to the block, as
// place() does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format.h"

namespace biofs::xattr {

inline constexpr uint32_t NAME_MAX_LEN = 255;  // the whole name with its prefix (XATTR_NAME_MAX)

struct Attr {
  std::string name, value;
};

// ---- the inline area ----------------------------------------------------------------------------
// Bytes the inline entries may use: 36, or 28 when the block's address takes the last 8.
uint32_t inline_capacity(const disk::Inode& d);
// The external block's address (INODE_XATTR_BLOCK set), else 0.
uint64_t block_of(const disk::Inode& d);
// Sets the address and the flag (blk 0: clears both). Call before pack_inline.
void set_block(disk::Inode& d, uint64_t blk);
// Bytes from the start of the inline area that hold whole entries (u8 name_len > 0, u8
// value_len, name, value) within its capacity; equal to xattr_len when the area is sound.
uint32_t inline_whole(const disk::Inode& d);
// The area holds whole entries only, within its capacity (inline_whole() == xattr_len).
bool inline_sound(const disk::Inode& d);
// Appends the inline entries to *out; false when the area is damaged.
bool parse_inline(const disk::Inode& d, std::vector<Attr>* out);
// Writes `attrs` (which fit: place() chose them) into the inline area, zeroing the rest of it.
void pack_inline(disk::Inode& d, const std::vector<Attr>& attrs);

// ---- the block ----------------------------------------------------------------------------------
enum class BlockState { ok, bad_header, bad_entries };
struct ParsedBlock {
  BlockState state = BlockState::ok;
  std::string why;          // one printable line when not ok ("fails its checksum", ...)
  std::vector<Attr> attrs;  // the whole entries (with bad_entries: those before the damage)
  uint32_t whole = 0;       // bytes of entries those take
};
// Checks block `blk` (bs bytes at b) as inode `owner`'s xattr block: magic, block number, crc
// (when check_crc: a dirty cached buffer's crc is stale until its commit), owner, reserved
// fields, `used` within the block, then every entry within `used`. Never reads outside b.
ParsedBlock parse_block(const uint8_t* b, uint32_t bs, uint64_t blk, uint64_t owner, bool check_crc);
// Fills the block: header (magic, block number; the crc is the writer's), owner, entries,
// zeros to the end. The attributes fit (place()).
void pack_block(uint8_t* b, uint32_t bs, uint64_t blk, uint64_t owner, const std::vector<Attr>& attrs);

// ---- placement ----------------------------------------------------------------------------------
// Splits `all` between the inline area and the block (order kept within each): all inline when
// they fit in 36 bytes; otherwise the block takes the rest of the subset that fits in the 28
// inline bytes and saves the block the most bytes (a 0/1 knapsack over 28 bytes), so a set is
// refused only when no placement holds it. false: it does not fit (ENOSPC).
bool place(const std::vector<Attr>& all, uint32_t bs, std::vector<Attr>* inl, std::vector<Attr>* blk);

}  // namespace biofs::xattr
