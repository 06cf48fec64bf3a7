#include "uring_util.h"

#include <cerrno>
#include <cstring>
#include <thread>

namespace biofs {

static std::string explain(int err, unsigned flags, const std::string& what) {
  std::string s = what + ": io_uring set-up failed: " + std::strerror(-err);
  switch (-err) {
    case ENOSYS:
      return s + " (this kernel has no io_uring)";
    case EPERM:
      return s + " (io_uring is disabled: sysctl kernel.io_uring_disabled, or a seccomp filter)";
    case ENOMEM:
      return s + " (out of locked memory: raise RLIMIT_MEMLOCK)";
    case EINVAL:
      if (flags & (IORING_SETUP_SQE128 | IORING_SETUP_CQE32))
        return s + " (the kernel lacks SQE128/CQE32 rings, which NVMe passthrough needs: Linux 5.19 or later)";
      return s + " (the kernel does not know these ring flags)";
    default:
      return s;
  }
}

std::string uring_init(io_uring* ring, unsigned entries, io_uring_params* p, unsigned optional,
                       const std::string& what) {
  const io_uring_params saved = *p;
  int ret = io_uring_queue_init_params(entries, ring, p);
  if (ret == -EINVAL && optional) {
    *p = saved;
    p->flags &= ~optional;
    ret = io_uring_queue_init_params(entries, ring, p);
  }
  if (ret < 0) return explain(ret, p->flags, what);
  return "";
}

int uring_submit(io_uring* ring) {
  int ret;
  for (int tries = 0;; tries++) {
    ret = io_uring_submit(ring);
    if (ret >= 0 || (ret != -EAGAIN && ret != -EBUSY && ret != -EINTR) || tries > 100000) return ret;
    std::this_thread::yield();  // completions must drain first (another thread reaps them)
  }
}

int uring_wait(io_uring* ring) {
  io_uring_cqe* cqe;
  if (!(ring->features & IORING_FEAT_EXT_ARG)) return io_uring_wait_cqe(ring, &cqe);
  __kernel_timespec ts{0, REAP_WAIT_MS * 1'000'000};
  return io_uring_wait_cqe_timeout(ring, &cqe, &ts);
}

}  // namespace biofs
