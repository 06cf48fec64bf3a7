#include "meta_cache.h"
#include "io_buf.h"

#include <cerrno>
#include <cstring>

namespace biofs {

using namespace disk;

MetaCache::MetaCache(BlockIo& io, const SuperBlock& sb, Journal& journal, size_t max_bytes)
    : io_(io), sb_(sb), journal_(journal), max_buffers_(std::max<size_t>(64, max_bytes / sb.block_size)) {}

int MetaCache::get(uint64_t blk, uint32_t magic, Buffer** out) {
  if (blk >= sb_.block_count) return -EUCLEAN;
  auto it = map_.find(blk);
  if (it != map_.end()) {
    hits++;
    *out = it->second.get();
    return 0;
  }
  misses++;
  auto b = std::make_unique<Buffer>();
  b->blk = blk;
  b->data = IoBuf(sb_.block_size);
  b->magic = magic;
  if (int err = io_.read(blk, 1, b->data.data())) {
    if (!read_error_) read_error_ = err;
    return err;
  }
  if (magic) {
    if (!block_header_ok(b->data.data(), sb_.block_size, magic, blk)) return -EUCLEAN;
  }
  *out = b.get();
  map_[blk] = std::move(b);
  return 0;
}

Buffer* MetaCache::get_new(uint64_t blk, uint32_t magic) {
  auto& slot = map_[blk];
  if (!slot) {
    slot = std::make_unique<Buffer>();
    slot->blk = blk;
    slot->data = IoBuf(sb_.block_size);
  } else {
    std::memset(slot->data.data(), 0, sb_.block_size);
  }
  slot->magic = magic;
  auto* h = reinterpret_cast<BlockHeader*>(slot->data.data());
  h->magic = magic;
  h->blocknr = blk;
  mark_dirty(slot.get());
  return slot.get();
}

void MetaCache::mark_dirty(Buffer* b) {
  if (b->dirty) return;
  b->dirty = true;
  dirty_.push_back(b);
}

void MetaCache::drop(uint64_t blk) {
  auto it = map_.find(blk);
  if (it == map_.end()) return;
  if (it->second->dirty) std::erase(dirty_, it->second.get());
  map_.erase(it);
}

int MetaCache::commit() {
  if (dirty_.empty()) return 0;
  std::vector<JournalBlock> blocks;
  blocks.reserve(dirty_.size());
  for (Buffer* b : dirty_) {
    if (b->magic) set_block_crc(b->data.data(), sb_.block_size);
    blocks.push_back({b->blk, b->data.data()});
  }
  if (int err = journal_.commit(blocks)) return err;
  for (Buffer* b : dirty_) b->dirty = false;
  dirty_.clear();
  return 0;
}

void MetaCache::trim() {
  if (map_.size() <= max_buffers_) return;
  for (auto it = map_.begin(); it != map_.end() && map_.size() > max_buffers_ / 2;) {
    if (!it->second->dirty) it = map_.erase(it);
    else ++it;
  }
}

}  // namespace biofs
