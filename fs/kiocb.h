// One file I/O's context, from the FUSE operation that asks for it down to the bios: the
// counterpart of struct kiocb (include/linux/fs.h, v6.18), which io_uring and the VFS hand to
// a filesystem's read_iter/write_iter and iomap_dio_rw() carries to bio submission. It names
// what the kernel keeps in the kiocb (position, IOCB_* flags, the poll state IOCB_HIPRI sets
// up) and the caller's buffer the I/O may use in place. The plug is not in it: as in the kernel
// it is the thread's (current->plug, blockcore/blk_mq.h), and every sleep dispatches it
// (blockcore/schedule.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "blockcore/blk_poll.h"

namespace biofs {

enum : unsigned {
  IOCB_DSYNC = 1u << 0,  // durable at completion: an overwrite's bios go out REQ_FUA
  // FUSE_WRITE_KILL_SUIDGID: the write drops S_ISUID (and S_ISGID with S_IXGRP), as
  // file_remove_privs() does for a writer without CAP_FSETID.
  IOCB_KILL_SUIDGID = 1u << 1,
  // The caller's buffer stays put until the completion (the FUSE ring's payload buffer): a
  // page-aligned one is submitted in place instead of copied.
  IOCB_BUF_STAYS = 1u << 2,
};

struct Kiocb {
  uint64_t ki_pos = 0;
  unsigned ki_flags = 0;  // IOCB_*
  // IOCB_HIPRI: the poll group the I/O is counted in (blockcore/blk_poll.h); its bios go
  // REQ_POLLED to the thread's poll queue and the group's opener reaps them. nullptr: the I/O
  // completes the usual way.
  BlkPollGroup* ki_poll = nullptr;
  // Memory a read may land in directly when the I/O is block-aligned and it is page-aligned
  // and large enough (the FUSE ring's payload buffer); otherwise the data is copied from a
  // buffer of the filesystem's own.
  uint8_t* ki_buf = nullptr;
  size_t ki_buf_size = 0;
};

}  // namespace biofs
