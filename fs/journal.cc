#include "journal.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "crc32c.h"
#include "io_batch.h"
#include "io_buf.h"

namespace biofs {

using namespace disk;

uint64_t Journal::capacity() const {
  // Layout from journal block 1: descriptors interleaved with copies, then one commit block.
  const uint64_t per = journal_targets_per_desc(sb_.block_size);
  const uint64_t room = sb_.journal_blocks - 2;  // journal superblock, commit block
  return room - (room + per) / (per + 1);        // leave one descriptor per `per` copies
}

int Journal::write_super() {
  const uint32_t bs = sb_.block_size;
  IoBuf buf(bs);
  make_journal_super(buf.data(), sb_, sequence_);
  return io_.write(sb_.journal_start, 1, buf.data(), REQ_PREFLUSH | REQ_FUA);
}

std::string Journal::recover(int* replayed, bool apply) {
  *replayed = 0;
  const uint32_t bs = sb_.block_size;
  IoBuf buf(bs);
  if (int err = io_.read(sb_.journal_start, 1, buf.data())) return std::string("cannot read the journal: ") + strerror(-err);
  const auto* j = reinterpret_cast<const JournalSuper*>(buf.data());
  if (!block_header_ok(buf.data(), bs, BLK_JOURNAL_SB, sb_.journal_start)) return "journal superblock is damaged";
  if (std::memcmp(j->uuid, sb_.uuid, 16) != 0) return "journal belongs to another filesystem";
  sequence_ = j->sequence;
  uint64_t pos = j->head;
  const uint64_t end = sb_.journal_blocks;
  for (;;) {
    // Gather the descriptors and copies of one transaction.
    std::vector<uint64_t> homes;
    std::vector<IoBuf> copies;
    uint32_t data_crc = 0;
    bool ok = true, last = false;
    while (ok && !last) {
      if (pos >= end) { ok = false; break; }
      IoBuf d(bs);
      if (io_.read(sb_.journal_start + pos, 1, d.data())) { ok = false; break; }
      const auto* desc = reinterpret_cast<const JournalDesc*>(d.data());
      if (desc->h.magic != BLK_JOURNAL_DESC || !block_crc_ok(d.data(), bs) ||
          desc->sequence != sequence_ || desc->nr > journal_targets_per_desc(bs) ||
          pos + 1 + desc->nr >= end) {
        ok = false;
        break;
      }
      last = desc->flags & JDESC_LAST;
      const auto* targets = reinterpret_cast<const uint64_t*>(d.data() + sizeof(JournalDesc));
      for (uint32_t i = 0; i < desc->nr; i++) {
        if (targets[i] >= sb_.block_count) { ok = false; break; }  // block 0: the superblock
        homes.push_back(targets[i]);
      }
      if (!ok) break;
      copies.resize(homes.size());
      IoBatch b(&io_);
      for (size_t i = homes.size() - desc->nr; i < homes.size(); i++) {
        copies[i] = IoBuf(bs);
        b.read(sb_.journal_start + pos + 1 + (i - (homes.size() - desc->nr)), 1, copies[i].data());
      }
      if (b.wait()) { ok = false; break; }
      pos += 1 + desc->nr;
    }
    if (!ok) break;
    IoBuf c(bs);
    if (io_.read(sb_.journal_start + pos, 1, c.data())) break;
    const auto* commit = reinterpret_cast<const JournalCommit*>(c.data());
    for (auto& cp : copies) data_crc = crc32c(data_crc, cp.data(), bs);
    if (commit->h.magic != BLK_JOURNAL_COMMIT || !block_crc_ok(c.data(), bs) ||
        commit->sequence != sequence_ || commit->nr_blocks != homes.size() || commit->data_crc != data_crc)
      break;
    if (!apply) {  // a dry run (fsck -n): count it and stop, the next would need this one applied
      (*replayed)++;
      break;
    }
    // A complete transaction: write every copy home (later copies of a block win).
    IoBatch b(&io_);
    for (size_t i = 0; i < homes.size(); i++) b.write(homes[i], 1, copies[i].data());
    if (int err = b.wait()) return std::string("journal replay write failed: ") + strerror(-err);
    (*replayed)++;
    sequence_++;
    pos++;
  }
  if (*replayed && apply) {
    if (io_.flush() || write_super()) return "cannot finish journal replay";
  }
  return "";
}

int Journal::commit(const std::vector<JournalBlock>& blocks) {
  if (blocks.empty()) return 0;
  const uint32_t bs = sb_.block_size;
  if (blocks.size() > capacity()) return -ENOSPC;
  const uint32_t per = journal_targets_per_desc(bs);
  const uint64_t js = sb_.journal_start;
  std::vector<IoBuf> descs;
  IoBatch log(&io_);
  uint64_t pos = 1;
  uint32_t data_crc = 0;
  for (size_t i = 0; i < blocks.size(); i += per) {
    const uint32_t n = uint32_t(std::min<size_t>(per, blocks.size() - i));
    descs.emplace_back(bs);
    auto* d = reinterpret_cast<JournalDesc*>(descs.back().data());
    d->h.magic = BLK_JOURNAL_DESC;
    d->h.blocknr = js + pos;
    d->sequence = sequence_;
    d->nr = n;
    d->flags = (i + n == blocks.size()) ? JDESC_LAST : 0;
    auto* targets = reinterpret_cast<uint64_t*>(descs.back().data() + sizeof(JournalDesc));
    for (uint32_t k = 0; k < n; k++) targets[k] = blocks[i + k].home;
    set_block_crc(descs.back().data(), bs);
    log.write(js + pos, 1, descs.back().data());
    for (uint32_t k = 0; k < n; k++) {
      log.write(js + pos + 1 + k, 1, blocks[i + k].data);
      data_crc = crc32c(data_crc, blocks[i + k].data, bs);
    }
    pos += 1 + n;
  }
  if (int err = log.wait()) return err;
  IoBuf cb(bs);
  auto* c = reinterpret_cast<JournalCommit*>(cb.data());
  c->h.magic = BLK_JOURNAL_COMMIT;
  c->h.blocknr = js + pos;
  c->sequence = sequence_;
  c->nr_blocks = uint32_t(blocks.size());
  c->data_crc = data_crc;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  c->commit_sec = now.tv_sec;
  c->commit_nsec = uint32_t(now.tv_nsec);
  set_block_crc(cb.data(), bs);
  // PREFLUSH: the logged copies and every data write completed before are durable first.
  if (int err = io_.write(js + pos, 1, cb.data(), REQ_PREFLUSH | REQ_FUA)) return err;
  if (crash_before_checkpoint) return -EIO;
  // Checkpoint: the blocks go home; then the journal superblock moves past this transaction.
  IoBatch home(&io_);
  for (const JournalBlock& b : blocks) home.write(b.home, 1, b.data);
  if (int err = home.wait()) return err;
  sequence_++;
  commits_.fetch_add(1, std::memory_order_relaxed);
  return write_super();  // PREFLUSH orders it after the checkpoint writes
}

}  // namespace biofs
