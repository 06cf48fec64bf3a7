// Reads and writes: how each is dispatched from the FUSE request to its bios and back to the
// reply. Whether its handler runs it to completion (polling its queue) or lets the completion
// path reply; the plug across a ring batch; libfuse's stock ring, where the handler must reply
// itself (HeldReply); the reactor's hot requests, decoded from the ring entry. What differs by
// transport, the request's RequestTransport says (request_transport.h). The op_* handlers
// (fuse_ops.cc) and the reactor (fuse_reactor.h) call in here.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fuse_ops.h"
#include "request_transport.h"

namespace biofs {

// fi->fh marks a handle on which the kernel does direct I/O (FOPEN_DIRECT_IO): it sends no
// fsync after an O_DSYNC write there (fuse_direct_write_iter), unlike on a cached handle
// (generic_write_sync after the write), so such a write must itself be durable (write_data).
inline constexpr uint64_t FH_DIRECT_IO = 1;

void read_data(const DataRequest& d, fuse_ino_t ino, size_t size, off_t off);
// keep_setid: the writer may keep set-id bits (CAP_FSETID).
void write_data(const DataRequest& d, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                const fuse_file_info* fi, bool keep_setid);

}  // namespace biofs
