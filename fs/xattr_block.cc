// Extended attribute bytes: the inline area and the external block (xattr_block.h). Kernel
// twins: fs/ext4/xattr.c's ext4_xattr_check_block and check_xattrs (parse_block),
// ext4_xattr_set_entry (pack_inline, pack_block).
#include "xattr_block.h"

#include <algorithm>
#include <cstring>

namespace biofs::xattr {

using namespace disk;

namespace {

constexpr uint32_t BLOCK_ADDR_AT = INLINE_XATTR_BYTES_WITH_BLOCK;  // xattr[28..35]

uint32_t inline_size(const Attr& a) {
  if (a.name.empty() || a.name.size() > 255 || a.value.size() > 255) return UINT32_MAX;
  return uint32_t(2 + a.name.size() + a.value.size());
}

uint64_t block_size_of(const Attr& a) { return XATTR_BLOCK_ENTRY_HEAD + a.name.size() + a.value.size(); }

}  // namespace

uint32_t inline_capacity(const Inode& d) {
  return (d.flags & INODE_XATTR_BLOCK) ? INLINE_XATTR_BYTES_WITH_BLOCK : INLINE_XATTR_BYTES;
}

uint64_t block_of(const Inode& d) {
  if (!(d.flags & INODE_XATTR_BLOCK)) return 0;
  uint64_t blk;
  std::memcpy(&blk, d.xattr + BLOCK_ADDR_AT, 8);
  return blk;
}

void set_block(Inode& d, uint64_t blk) {
  if (blk) d.flags |= INODE_XATTR_BLOCK;
  else d.flags &= ~INODE_XATTR_BLOCK;
  std::memcpy(d.xattr + BLOCK_ADDR_AT, &blk, 8);
}

uint32_t inline_whole(const Inode& d) {
  const uint32_t len = std::min<uint32_t>(d.xattr_len, inline_capacity(d));
  uint32_t p = 0;
  while (p + 2 <= len && d.xattr[p] && p + 2 + d.xattr[p] + d.xattr[p + 1] <= len) p += 2 + d.xattr[p] + d.xattr[p + 1];
  return p;
}

// inline_whole() stops at the capacity: equal to xattr_len only when that is within it.
bool inline_sound(const Inode& d) { return inline_whole(d) == d.xattr_len; }

bool parse_inline(const Inode& d, std::vector<Attr>* out) {
  if (!inline_sound(d)) return false;
  for (uint32_t p = 0; p < d.xattr_len;) {
    const uint32_t nl = d.xattr[p], vl = d.xattr[p + 1];
    const char* base = reinterpret_cast<const char*>(d.xattr) + p + 2;
    out->push_back({std::string(base, nl), std::string(base + nl, vl)});
    p += 2 + nl + vl;
  }
  return true;
}

void pack_inline(Inode& d, const std::vector<Attr>& attrs) {
  const uint32_t cap = inline_capacity(d);
  std::memset(d.xattr, 0, cap);
  uint32_t p = 0;
  for (const Attr& a : attrs) {
    d.xattr[p] = uint8_t(a.name.size());
    d.xattr[p + 1] = uint8_t(a.value.size());
    std::memcpy(d.xattr + p + 2, a.name.data(), a.name.size());
    std::memcpy(d.xattr + p + 2 + a.name.size(), a.value.data(), a.value.size());
    p += inline_size(a);
  }
  d.xattr_len = uint16_t(p);
}

ParsedBlock parse_block(const uint8_t* b, uint32_t bs, uint64_t blk, uint64_t owner, bool check_crc) {
  ParsedBlock r;
  XattrBlock x;
  std::memcpy(&x, b, sizeof(x));
  auto bad = [&](BlockState s, std::string why) {
    r.state = s;
    r.why = std::move(why);
    return r;
  };
  if (x.h.magic != BLK_XATTR || x.h.blocknr != blk || (check_crc && !block_crc_ok(b, bs)))
    return bad(BlockState::bad_header, "fails its checksum or header check");
  if (x.owner != owner) return bad(BlockState::bad_header, "belongs to inode " + std::to_string(x.owner));
  if (x.reserved) return bad(BlockState::bad_header, "has a nonzero reserved field");
  if (x.used > xattr_block_room(bs))
    return bad(BlockState::bad_header, "says " + std::to_string(x.used) + " bytes of entries, more than it holds");
  const uint8_t* e = b + sizeof(XattrBlock);
  for (uint32_t p = 0; p < x.used;) {
    const std::string at = " at byte " + std::to_string(sizeof(XattrBlock) + p);
    if (x.used - p < XATTR_BLOCK_ENTRY_HEAD) return bad(BlockState::bad_entries, "has an entry cut short" + at);
    const uint32_t nl = e[p];
    uint16_t vl;
    std::memcpy(&vl, e + p + 2, 2);
    if (nl == 0 || e[p + 1] != 0) return bad(BlockState::bad_entries, "has a malformed entry" + at);
    if (uint64_t(XATTR_BLOCK_ENTRY_HEAD) + nl + vl > x.used - p)
      return bad(BlockState::bad_entries, "has an entry running past its end" + at);
    const char* name = reinterpret_cast<const char*>(e + p + XATTR_BLOCK_ENTRY_HEAD);
    r.attrs.push_back({std::string(name, nl), std::string(name + nl, vl)});
    p += XATTR_BLOCK_ENTRY_HEAD + nl + vl;
    r.whole = p;
  }
  return r;
}

void pack_block(uint8_t* b, uint32_t bs, uint64_t blk, uint64_t owner, const std::vector<Attr>& attrs) {
  std::memset(b, 0, bs);
  auto* x = reinterpret_cast<XattrBlock*>(b);
  x->h.magic = BLK_XATTR;
  x->h.blocknr = blk;
  x->owner = owner;
  uint8_t* e = b + sizeof(XattrBlock);
  uint32_t p = 0;
  for (const Attr& a : attrs) {
    const uint16_t vl = uint16_t(a.value.size());
    e[p] = uint8_t(a.name.size());
    std::memcpy(e + p + 2, &vl, 2);
    std::memcpy(e + p + XATTR_BLOCK_ENTRY_HEAD, a.name.data(), a.name.size());
    std::memcpy(e + p + XATTR_BLOCK_ENTRY_HEAD + a.name.size(), a.value.data(), a.value.size());
    p += uint32_t(block_size_of(a));
  }
  x->used = p;
}

bool place(const std::vector<Attr>& all, uint32_t bs, std::vector<Attr>* inl, std::vector<Attr>* blk) {
  inl->clear();
  blk->clear();
  uint64_t inline_total = 0, block_total = 0;
  for (const Attr& a : all) {
    if (a.name.empty() || a.name.size() > NAME_MAX_LEN) return false;
    inline_total += std::min<uint64_t>(inline_size(a), 1u << 20);
    block_total += block_size_of(a);
  }
  if (inline_total <= INLINE_XATTR_BYTES) {
    *inl = all;
    return true;
  }
  // Knapsack: best[c] = most block bytes saved by inline entries taking at most c bytes.
  constexpr uint32_t CAP = INLINE_XATTR_BYTES_WITH_BLOCK;
  const size_t n = all.size();
  std::vector<uint64_t> best(CAP + 1, 0);
  std::vector<uint8_t> took(n * (CAP + 1), 0);  // took[i * (CAP + 1) + c]: item i in best[c] after i
  for (size_t i = 0; i < n; i++) {
    const uint32_t w = inline_size(all[i]);  // at least 3
    if (w > CAP) continue;
    const uint64_t gain = block_size_of(all[i]);
    for (uint32_t c = CAP; c >= w; c--)
      if (best[c - w] + gain > best[c]) {
        best[c] = best[c - w] + gain;
        took[i * (CAP + 1) + c] = 1;
      }
  }
  if (block_total - best[CAP] > xattr_block_room(bs)) return false;
  std::vector<bool> inside(n, false);
  for (size_t i = n, c = CAP; i-- > 0;)
    if (took[i * (CAP + 1) + c]) {
      inside[i] = true;
      c -= inline_size(all[i]);
    }
  for (size_t i = 0; i < n; i++) (inside[i] ? inl : blk)->push_back(all[i]);
  return true;
}

}  // namespace biofs::xattr
