// File reads and writes as bios over the extent map, completing asynchronously. The kernel
// twins: the direct I/O path of fs/iomap/direct-io.c (map under the inode lock, count the I/O
// in i_dio_count with inode_dio_begin/inode_dio_end, complete from the bio's end_io) and
// ext4's write paths (overwrites of written blocks run shared; writes that allocate or convert
// unwritten extents finish their metadata after the data; unaligned writes wait for all I/O in
// flight, ext4_dio_write_iter's inode_dio_wait, and read-modify-write under the exclusive lock).
#include "file_io.h"

#include <algorithm>
#include <vector>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "attr_flags.h"
#include "extent_map.h"
#include "inode_table.h"
#include "io_batch.h"
#include "io_buf.h"
#include "super.h"
#include "xattr.h"

namespace biofs {

using namespace disk;

int FileIo::read_blocks(InodeObj* in, uint64_t lblk, uint64_t count, uint8_t* buf) {
  IoBatch batch(&s_.io);
  for (uint64_t l = lblk; l < lblk + count;) {
    uint64_t run;
    bool unwritten;
    const uint64_t p = extents_.map_block(in, l, &run, &unwritten);
    run = std::min(run, lblk + count - l);
    if (p && !unwritten) batch.read(p, uint32_t(run), buf + (l - lblk) * s_.bs);
    else std::memset(buf + (l - lblk) * s_.bs, 0, run * s_.bs);
    l += run;
  }
  return batch.wait();
}

// One asynchronous file I/O (iomap's struct iomap_dio): its bios, its aligned buffer and who
// to tell. Deleted by the completion of its last bio.
struct FileIo::Dio {
  // bytes == 0: the I/O uses the caller's memory, no buffer of its own.
  Dio(BlockIo* io, size_t bytes, BlkPollGroup* poll) : batch(io, poll), buf(bytes ? IoBuf(bytes, false) : IoBuf()) {}
  IoBatch batch;
  IoBuf buf;
  uint8_t* data = nullptr;  // buf, or the caller's memory (reads)
  InodeObj* in = nullptr;
  size_t skip = 0;   // bytes of buf before the caller's data (reads)
  size_t len = 0;    // the caller's bytes
  ReadDone read_done;
  WriteDone write_done;
};

bool FileIo::times_need_update(const Inode& d) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return d.mtime_sec != int64_t(now.tv_sec) || d.mtime_nsec != uint32_t(now.tv_nsec) ||
         d.ctime_sec != int64_t(now.tv_sec) || d.ctime_nsec != uint32_t(now.tv_nsec);
}

void FileIo::read_async(uint64_t ino, const Kiocb& iocb, size_t size, ReadDone done) {
  const uint64_t off = iocb.ki_pos;
  uint8_t* const into = iocb.ki_buf;
  std::shared_lock shared(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget_shared(shared, ino, &in)) {
    shared.unlock();
    return done(err, nullptr);
  }
  if (S_ISDIR(in->d.mode)) {
    shared.unlock();
    return done(-EISDIR, nullptr);
  }
  // file_accessed(), first, as the write path sets its times first: a stat the kernel sends
  // once it has the reply (the READ dropped its cached atime) must find the new time. A brief
  // exclusive hold, once per change of the file under relatime.
  if (itable_.atime_due(in)) {
    shared.unlock();
    touch_atime(ino);
    shared.lock();
    if (int err = itable_.iget_shared(shared, ino, &in)) {
      shared.unlock();
      return done(err, nullptr);
    }
  }
  if (off >= in->d.size || size == 0) {
    shared.unlock();
    return done(0, nullptr);
  }
  size = size_t(std::min<uint64_t>(size, in->d.size - off));
  const uint64_t first = off / s_.bs, last = (off + size - 1) / s_.bs, count = last - first + 1;
  const bool in_place =
      into && off % s_.bs == 0 && count * s_.bs <= iocb.ki_buf_size &&
      reinterpret_cast<uintptr_t>(into) % PAGE_SIZE == 0;
  auto* op = new Dio(&s_.io, in_place ? 0 : count * s_.bs, iocb.ki_poll);
  uint8_t* const base = in_place ? into : op->buf.data();
  op->in = in;
  op->data = base;
  op->skip = off - first * s_.bs;
  op->len = size;
  op->read_done = std::move(done);
  op->batch.on_complete([op](int err) {
    inode_dio_end(op->in);
    if (err) op->read_done(err, nullptr);
    else op->read_done(ssize_t(op->len), op->data + op->skip);
    delete op;
  });
  // iomap_dio_rw(): counted in flight, then the bios built and sent as the blocks are mapped,
  // under a plug that holds them until the lock is let go.
  inode_dio_begin(in);
  BlkPlug plug;
  blk_start_plug(&plug);
  for (uint64_t l = first; l <= last;) {
    uint64_t run;
    bool unwritten;
    const uint64_t p = extents_.map_block(in, l, &run, &unwritten);
    run = std::min(run, last + 1 - l);
    uint8_t* dst = base + (l - first) * s_.bs;
    if (p && !unwritten) op->batch.read(p, uint32_t(run), dst);
    else std::memset(dst, 0, run * s_.bs);  // a hole or unwritten extent reads as zeros
    l += run;
  }
  shared.unlock();
  op->batch.submit();
  blk_finish_plug(&plug);
}

bool FileIo::drop_suidgid(Inode& d) {
  const uint32_t before = d.mode;
  d.mode &= ~S_ISUID;
  if ((d.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) d.mode &= ~S_ISGID;
  return d.mode != before;
}

void FileIo::write_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* data, WriteDone done) {
  write_iter(ino, iocb, size, data, std::move(done));
}

bool FileIo::write_iter(uint64_t ino, const Kiocb& iocb, size_t size, const char* data, WriteDone done) {
  const uint64_t off = iocb.ki_pos, end = off + size;
  if (size && off % s_.bs == 0 && end % s_.bs == 0 && end > off) {
    // Times first, as ext4's file_update_time() does before a write: a brief exclusive hold
    // that moves no data, so the first write of each clock tick stays on the fast path too.
    switch (try_overwrite_async(ino, iocb, size, data, done, true)) {
      case Overwrite::submitted: return true;
      case Overwrite::times_stale:
        // Once set, the times stand for this write even if the clock ticks again meanwhile.
        if (update_file_times(ino) == 0 && try_overwrite_async(ino, iocb, size, data, done, false) == Overwrite::submitted)
          return true;
        break;
      case Overwrite::not_possible: break;
    }
  }
  bool handed_off = false;  // to the end-io worker, which answers once the extents are converted
  const ssize_t r = write_locked(ino, iocb, size, data, &done, &handed_off);
  if (!handed_off) done(r);
  return false;
}

// Bios writing buf to the blocks that logical blocks first..last map to (all mapped).
void FileIo::write_mapped(InodeObj* in, uint64_t first, uint64_t last, const uint8_t* buf, IoBatch* batch,
                          blk_opf_t flags) {
  for (uint64_t l = first; l <= last;) {
    uint64_t run;
    const uint64_t p = extents_.map_block(in, l, &run, nullptr);
    run = std::min(run, last + 1 - l);
    batch->write(p, uint32_t(run), buf + (l - first) * s_.bs, flags);
    l += run;
  }
}

// The overwrite fast path: every block mapped and written, inside the file, times already
// current (or, !check_times, just set by this write). No metadata changes, so the shared lock
// covers the mapping. `done` is moved from only when the bios were submitted.
FileIo::Overwrite FileIo::try_overwrite_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* data,
                                              WriteDone& done, bool check_times) {
  const uint64_t off = iocb.ki_pos, end = off + size;
  const bool fsetid = !(iocb.ki_flags & IOCB_KILL_SUIDGID);
  std::shared_lock shared(s_.lock);
  InodeObj* in;
  if (itable_.iget_shared(shared, ino, &in) || !S_ISREG(in->d.mode) || end > in->d.size ||
      !(fsetid || !(in->d.mode & (S_ISUID | S_ISGID))) || in->has_caps != 0 || s_.commit.failed() || s_.read_only ||
      IS_IMMUTABLE(in) || IS_APPEND(in))  // write_locked refuses them (attr_flags.h)
    return Overwrite::not_possible;
  const uint64_t first = off / s_.bs, last = (end - 1) / s_.bs;
  for (uint64_t l = first; l <= last;) {
    uint64_t run;
    bool unwritten;
    if (!extents_.map_block(in, l, &run, &unwritten) || unwritten) return Overwrite::not_possible;
    l += run;
  }
  if (check_times && times_need_update(in->d)) return Overwrite::times_stale;
  // The caller's memory as it is when it stays put until done and is page-aligned (the
  // FUSE-over-io_uring payload buffer); otherwise an aligned copy.
  const bool in_place = (iocb.ki_flags & IOCB_BUF_STAYS) && reinterpret_cast<uintptr_t>(data) % PAGE_SIZE == 0;
  auto* op = new Dio(&s_.io, in_place ? 0 : size, iocb.ki_poll);
  op->in = in;
  op->len = size;
  op->write_done = std::move(done);
  op->data = in_place ? reinterpret_cast<uint8_t*>(const_cast<char*>(data)) : op->buf.data();
  if (!in_place) {
    std::memcpy(op->data, data, size);
    s_.io.write_copies.fetch_add(1, std::memory_order_relaxed);
  }
  op->batch.on_complete([op](int err) {
    inode_dio_end(op->in);
    op->write_done(err ? ssize_t(err) : ssize_t(op->len));
    delete op;
  });
  inode_dio_begin(in);
  BlkPlug plug;
  blk_start_plug(&plug);
  // iomap's IOMAP_DIO_WRITE_THROUGH: an O_DSYNC overwrite is durable with its own bios.
  write_mapped(in, first, last, op->data, &op->batch, (iocb.ki_flags & IOCB_DSYNC) ? REQ_FUA : 0);
  shared.unlock();
  op->batch.submit();
  blk_finish_plug(&plug);
  return Overwrite::submitted;
}

void FileIo::touch_atime(uint64_t ino) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (itable_.iget(ino, &in) == 0) itable_.accessed(in);
}

// mtime and ctime to now, journaled with the next commit (file_update_time()).
int FileIo::update_file_times(uint64_t ino) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (!S_ISREG(in->d.mode) || s_.commit.failed() || s_.read_only) return -EINVAL;
  InodeTable::touch(in->d, false, true, true);
  return itable_.isave(in, true);
}

// Writes that change metadata: allocation, unwritten conversion, size, times. The data moves
// with no lock held unless the write allocates or is unaligned (read-modify-write of its edge
// blocks).
ssize_t FileIo::write_locked(uint64_t ino, const Kiocb& iocb, size_t size, const char* data,
                             WriteDone* convert_done, bool* handed_off) {
  const uint64_t off = iocb.ki_pos;
  const bool fsetid = !(iocb.ki_flags & IOCB_KILL_SUIDGID);
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit(size / s_.bs + 8)) return err;  // its blocks, edges and tree blocks
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (!S_ISREG(in->d.mode)) return -EINVAL;
  if (int err = may_write(in, off)) return err;
  if (size == 0) return 0;
  const uint64_t end = off + size;
  if (end < off || end / s_.bs >= disk::MAX_FILE_BLOCKS) return -EFBIG;
  const uint64_t first = off / s_.bs, last = (end - 1) / s_.bs, n = last - first + 1;
  const bool rmw = off % s_.bs || end % s_.bs;
  if (!rmw && convert_done && try_convert_async(ex, in, iocb, first, last, end, data, *convert_done)) {
    *handed_off = true;
    return 0;
  }
  IoBuf tmp(n * s_.bs, false);  // head/tail reads and the caller's data cover every byte
  if (rmw) {
    inode_dio_wait(in);  // an aligned write in flight to an edge block would be lost
    // Read the partial head and tail blocks before allocating: a hole must read as zeros.
    if (off % s_.bs) {
      if (int err = read_blocks(in, first, 1, tmp.data())) return err;
    }
    if (end % s_.bs && (last != first || off % s_.bs == 0)) {
      if (int err = read_blocks(in, last, 1, tmp.data() + (n - 1) * s_.bs)) return err;
    }
  }
  std::memcpy(tmp.data() + (off - first * s_.bs), data, size);
  std::vector<std::pair<uint64_t, uint64_t>> added;
  if (int err = extents_.allocate_range(in, first, n, false, &added)) return err;
  // Data first (ordered mode): the bios complete before the metadata naming them can commit.
  // A write that allocated keeps the lock while its data moves, so no commit can record blocks
  // that hold nothing yet and an error can take them back whole; overwrites and conversions
  // of unwritten extents (fallocate'd space) let go of it.
  inode_dio_begin(in);
  IoBatch batch(&s_.io);
  BlkPlug plug;
  blk_start_plug(&plug);
  write_mapped(in, first, last, tmp.data(), &batch);
  const bool keep_lock = rmw || !added.empty();
  if (!keep_lock) ex.unlock();
  batch.submit();
  blk_finish_plug(&plug);
  const int io_err = batch.wait();
  inode_dio_end(in);
  if (!ex.owns_lock()) {
    ex.lock();
    if (int err = itable_.iget(ino, &in)) return err;
  }
  if (io_err) {
    // The new blocks hold nothing valid: unmap them again, so no metadata points at them.
    for (auto [l, c] : added) extents_.punch_extents(in, l, c);
    if (!added.empty()) extents_.save_extents(in);
    return io_err;
  }
  return finish_write(in, first, n, end, size, fsetid, !added.empty());
}

ssize_t FileIo::finish_write(InodeObj* in, uint64_t first, uint64_t n, uint64_t end, size_t size, bool fsetid,
                             bool extents_changed) {
  if (int err = update_after_write(in, first, n, end, fsetid, &extents_changed)) return err;
  const int err = extents_changed ? extents_.save_extents(in) : itable_.isave(in);
  return err ? err : ssize_t(size);
}

int FileIo::update_after_write(InodeObj* in, uint64_t first, uint64_t n, uint64_t end, bool fsetid,
                               bool* extents_changed) {
  if (extents_.set_unwritten(in, first, n, false)) *extents_changed = true;
  if (end > in->d.size) in->d.size = end;
  if (!fsetid && drop_suidgid(in->d) && s_.opts.attrs_changed) s_.opts.attrs_changed(in->ino);
  if (int err = xattrs_.kill_caps(in)) return err;
  InodeTable::touch(in->d, false, true, true);
  return 0;
}

// One aligned write into unwritten blocks, from submission to its conversion (end_io_work.h).
struct FileIo::ConvertIo : EndIoWork::Item {
  ConvertIo(BlockIo* io, size_t bytes, BlkPollGroup* poll) : batch(io, poll), buf(bytes, false) {}
  IoBatch batch;
  IoBuf buf;
  uint64_t ino = 0, first = 0, n = 0, end = 0;
  size_t size = 0;
  bool fsetid = true;
  int io_err = 0;
  WriteDone done;
};

// Under write_locked's exclusive hold: an aligned write whose blocks are all mapped, some of
// them unwritten, goes out asynchronously and is answered by end_io (fs_info.h) after the conversion.
bool FileIo::try_convert_async(std::unique_lock<FsLock>& ex, InodeObj* in, const Kiocb& iocb, uint64_t first,
                               uint64_t last, uint64_t end, const char* data, WriteDone& done) {
  if (!s_.end_io || s_.commit.failed()) return false;
  bool any_unwritten = false;
  for (uint64_t l = first; l <= last;) {
    uint64_t run;
    bool unwritten;
    if (!extents_.map_block(in, l, &run, &unwritten)) return false;  // a hole: the write allocates
    any_unwritten |= unwritten;
    l += run;
  }
  if (!any_unwritten) return false;
  const size_t size = size_t((last - first + 1) * s_.bs);
  const uint64_t ino = in->ino;
  auto* w = new ConvertIo(&s_.io, size, iocb.ki_poll);
  w->ino = ino, w->first = first, w->n = last - first + 1, w->end = end, w->size = size;
  w->fsetid = !(iocb.ki_flags & IOCB_KILL_SUIDGID);
  w->done = std::move(done);
  std::memcpy(w->buf.data(), data, size);
  w->batch.on_complete([this, w, in](int err) {
    w->io_err = err;
    inode_dio_end(in);
    s_.end_io->queue(w);
  });
  // As write_locked's conversions: the data moves with no lock held, truncate and punch wait
  // for it (the dio count), and the extents are converted only once it is on disk.
  inode_dio_begin(in);
  s_.end_io->begin();
  BlkPlug plug;
  blk_start_plug(&plug);
  write_mapped(in, first, last, w->buf.data(), &w->batch);
  ex.unlock();
  w->batch.submit();
  blk_finish_plug(&plug);
  return true;
}

// end_io's batch: every queued conversion under one hold of the lock, then the replies.
// Every write of the batch is applied first and each inode saved once at the end, as ext4's
// ext4_end_io_rsv_work() converts a whole list of io_ends in one pass: a fragmented extent map
// is rewritten once per batch, not once per write.
void FileIo::finish_conversions(std::vector<EndIoWork::Item*>& items) {
  std::vector<ssize_t> results(items.size());
  {
    std::unique_lock ex(s_.lock);
    std::vector<InodeObj*> item_inode(items.size(), nullptr);
    std::vector<std::pair<InodeObj*, bool>> touched;  // each inode once, and whether its extents changed
    for (size_t i = 0; i < items.size(); i++) {
      auto* w = static_cast<ConvertIo*>(items[i]);
      InodeObj* in;
      if (w->io_err) results[i] = w->io_err;
      else if (s_.commit.failed()) results[i] = s_.commit.refusal();
      else if (int err = itable_.iget(w->ino, &in)) results[i] = err;
      else {
        auto t = std::find_if(touched.begin(), touched.end(), [in](const auto& p) { return p.first == in; });
        if (t == touched.end()) t = touched.insert(touched.end(), {in, false});
        const int e = update_after_write(in, w->first, w->n, w->end, w->fsetid, &t->second);
        results[i] = e ? e : ssize_t(w->size);
        if (!e) item_inode[i] = in;
      }
    }
    for (const auto& [in, extents_changed] : touched) {
      const int err = extents_changed ? extents_.save_extents(in) : itable_.isave(in);
      if (!err) continue;
      for (size_t i = 0; i < items.size(); i++)
        if (item_inode[i] == in) results[i] = err;
    }
  }
  for (size_t i = 0; i < items.size(); i++) {
    auto* w = static_cast<ConvertIo*>(items[i]);
    w->done(results[i]);
    delete w;
    s_.end_io->end();
  }
}

// The synchronous forms wait for the asynchronous ones (submit_bio_wait()'s completion on the
// stack). A waiter whose I/O is counted in a poll group polls for it: asleep, it would never be
// woken, for no completion thread reaps a poll queue.
namespace {
struct Waiter {
  Completion done;
  ssize_t result = 0;
  void finish(ssize_t r) {
    result = r;
    done.complete();
  }
  ssize_t wait(BlkPollGroup* poll) {
    if (poll) blk_poll_group_wait_for(poll, [this] { return done.completion_done(); });
    done.wait_for_completion();
    return result;
  }
};
}  // namespace

ssize_t FileIo::read(uint64_t ino, const Kiocb& iocb, size_t size, char* buf) {
  Waiter w;
  read_async(ino, iocb, size, [&w, buf](ssize_t n, const uint8_t* data) {
    if (n > 0) std::memcpy(buf, data, size_t(n));
    w.finish(n);
  });
  return w.wait(iocb.ki_poll);
}

ssize_t FileIo::write(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf) {
  Waiter w;
  write_async(ino, iocb, size, buf, [&w](ssize_t n) { w.finish(n); });
  return w.wait(iocb.ki_poll);
}

ssize_t FileIo::copy_file_range(uint64_t ino_in, uint64_t off_in, uint64_t ino_out, uint64_t off_out,
                                size_t len) {
  constexpr size_t kStep = 1u << 20;
  std::vector<char> buf(std::min(len, kStep));
  size_t done = 0;
  while (done < len) {
    const size_t want = std::min(len - done, kStep);
    const ssize_t n = read(ino_in, Kiocb{.ki_pos = off_in + done}, want, buf.data());
    if (n <= 0) {
      if (n < 0 && done == 0) return n;
      break;  // the end of the source
    }
    const ssize_t w = write(ino_out, Kiocb{.ki_pos = off_out + done}, size_t(n), buf.data());
    if (w < 0) {
      if (done == 0) return w;
      break;
    }
    done += size_t(w);
    if (size_t(n) < want) break;
  }
  return ssize_t(done);
}

ssize_t FileIo::write_durable(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, bool datasync) {
  // Its FUA write is polled by this thread where the device has poll queues (blk_poll.h): a
  // synchronous write wakes no completion thread, as pwrite(O_DSYNC) on a polled queue.
  Waiter w;
  BlkPollGroup group;
  Kiocb dsync = iocb;
  dsync.ki_flags |= IOCB_DSYNC | IOCB_BUF_STAYS;
  dsync.ki_poll = blk_poll_group_start(&group, s_.io.bdev()->queue) ? &group : nullptr;
  const bool fua = write_iter(ino, dsync, size, buf, [&w](ssize_t n) { w.finish(n); });
  if (dsync.ki_poll) blk_poll_group_wait(&group);
  const ssize_t n = w.wait(nullptr);
  if (n < 0) return n;
  if (int err = super_.fsync(ino, datasync, fua)) return err;
  return n;
}

}  // namespace biofs
