// libfuse's API across the versions biofs builds on: the archive's newest fuse3 source (3.18 and
// later, built by tools/build-libfuse.sh) and Debian 12's own libfuse3-dev 3.14, the fallback
// when no newer one could be built. 3.14 has no FUSE-over-io_uring (the daemon serves /dev/fuse
// and says so) and no 64-bit feature flags (3.17); what the daemon asks for, it asks here.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 318
#endif
#include <fuse_lowlevel.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
#define BIOFS_FUSE_HAS_URING 1
// The tmpfile and statx operations (O_TMPFILE; statx's birth time): 3.14 has neither, and a
// mount on it refuses O_TMPFILE with EOPNOTSUPP and shows no birth time, as before.
#define BIOFS_FUSE_HAS_TMPFILE_STATX 1
// The nodiratime mount flag: 3.14's option table has noatime and not nodiratime, and its session
// refuses it as unknown; the daemon keeps its own nodiratime rule (fs/atime.h) either way.
#define BIOFS_FUSE_TAKES_NODIRATIME 1
#else
#define BIOFS_FUSE_HAS_URING 0
#define BIOFS_FUSE_HAS_TMPFILE_STATX 0
#define BIOFS_FUSE_TAKES_NODIRATIME 0
#endif

namespace biofs {

// fuse_set_feature_flag(): sets `cap` in what the daemon wants if the kernel offers it.
inline bool fuse_want(fuse_conn_info* conn, uint64_t cap) {
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 17)
  return fuse_set_feature_flag(conn, cap);
#else
  if (!(conn->capable & cap)) return false;
  conn->want |= unsigned(cap);
  return true;
#endif
}

inline void fuse_unwant(fuse_conn_info* conn, uint64_t cap) {
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 17)
  fuse_unset_feature_flag(conn, cap);
#else
  conn->want &= ~unsigned(cap);
#endif
}

inline bool fuse_offers(const fuse_conn_info* conn, uint64_t cap) {
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 17)
  return conn->capable_ext & cap;
#else
  return conn->capable & cap;
#endif
}

// Whether `req` came over FUSE-over-io_uring; never with a libfuse that has none.
inline bool fuse_req_on_ring(fuse_req_t req) {
#if BIOFS_FUSE_HAS_URING
  return fuse_req_is_uring(req);
#else
  (void)req;
  return false;
#endif
}

// The ring entry's payload buffer of a request that came over io_uring: 0, or -1 without one.
inline int fuse_req_ring_payload(fuse_req_t req, char** payload, size_t* size) {
#if BIOFS_FUSE_HAS_URING
  return fuse_req_get_payload(req, payload, size, nullptr);
#else
  (void)req, (void)payload, (void)size;
  return -1;
#endif
}

// fuse_session_custom_io(): the session's reads and writes of `fd` go through `io` (3.13 on;
// 3.17 added the size of `io` to the call).
inline int fuse_set_custom_io(fuse_session* se, const fuse_custom_io* io, int fd) {
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 17)
  return fuse_session_custom_io(se, io, sizeof(*io), fd);
#else
  return fuse_session_custom_io(se, io, fd);
#endif
}

// Whether /dev/fuse requests reach the handlers with a page-aligned write payload, which libfuse
// arranges from 3.17.1 ("Allow to have page aligned writes"): a polled overwrite can then go to
// the device from the request's own buffer (fs/file_io.cc, try_overwrite_async); before, it is
// copied. Read from the running library, since 3.17.0 and 3.17.1 share FUSE_VERSION.
inline bool fuse_dev_payload_aligned() {
  unsigned major = 0, minor = 0, patch = 0;
  if (std::sscanf(fuse_pkgversion(), "%u.%u.%u", &major, &minor, &patch) < 2) return false;
  return major > 3 || (major == 3 && (minor > 17 || (minor == 17 && patch >= 1)));
}

}  // namespace biofs
