// The kernel's FUSE-over-io_uring interface, as Linux 6.14+ declares it in
// include/uapi/linux/fuse.h (protocol 7.42; unchanged through 6.18). Declared here because
// Debian 12's linux-libc-dev (6.1) predates it; names and layout are the kernel's, inside
// biofs::kuapi so that a newer <linux/fuse.h> does not clash. The classic structures
// (fuse_in_header, fuse_init_in/out, ...) come from <linux/fuse.h>.
#pragma once

#include <linux/fuse.h>

#include <cstdint>

namespace biofs::kuapi {

// fuse_init_in/out.flags2 is bits 32..63 of the INIT flags (FUSE_INIT_EXT).
inline constexpr uint64_t FUSE_OVER_IO_URING = 1ULL << 41;
inline constexpr uint32_t FUSE_INIT_EXT_FLAG = 1u << 30;
inline constexpr uint32_t FUSE_MAX_PAGES_FLAG = 1u << 22;

inline constexpr unsigned FUSE_URING_IN_OUT_HEADER_SZ = 128;
inline constexpr unsigned FUSE_URING_OP_IN_OUT_SZ = 128;

// Written by the kernel with each request, read back with the reply.
struct fuse_uring_ent_in_out {
  uint64_t flags;
  uint64_t commit_id;   // the request's unique: the reply's COMMIT_AND_FETCH names it
  uint32_t payload_sz;  // bytes in the payload buffer, in either direction
  uint32_t padding;
  uint64_t reserved;
};

// A ring entry's header buffer (iov[0] of REGISTER); iov[1] is its payload buffer.
struct fuse_uring_req_header {
  char in_out[FUSE_URING_IN_OUT_HEADER_SZ];  // fuse_in_header on fetch, fuse_out_header on commit
  char op_in[FUSE_URING_OP_IN_OUT_SZ];       // the opcode's fixed argument (the request's in_args[0])
  fuse_uring_ent_in_out ring_ent_in_out;
};

enum fuse_uring_cmd : uint32_t {
  FUSE_IO_URING_CMD_INVALID = 0,
  FUSE_IO_URING_CMD_REGISTER = 1,          // register an entry's buffers and fetch a request
  FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,  // commit a reply and fetch the next request
};

// In the command area of an SQE128.
struct fuse_uring_cmd_req {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;  // the queue: one per possible CPU, requests go to their submitter's CPU's
  uint8_t padding[6];
};

static_assert(sizeof(fuse_uring_ent_in_out) == 32);
static_assert(sizeof(fuse_uring_req_header) == 288);
static_assert(sizeof(fuse_uring_cmd_req) == 24);

}  // namespace biofs::kuapi
