#include "syncfs.h"

#include <linux/fuse.h>
#include <unistd.h>

#include <cerrno>

namespace biofs {

bool is_syncfs_request(const void* buf, size_t len) {
  return len >= sizeof(fuse_in_header) && static_cast<const fuse_in_header*>(buf)->opcode == FUSE_SYNCFS;
}

ssize_t read_answering_syncfs(int fd, void* buf, size_t len, SyncFsFn sync, void* userdata) {
  for (;;) {
    const ssize_t n = read(fd, buf, len);
    if (n < 0 || !sync || !is_syncfs_request(buf, size_t(n))) return n;
    fuse_out_header out{};
    out.len = sizeof(out);
    out.unique = static_cast<const fuse_in_header*>(buf)->unique;
    out.error = sync(userdata);
    if (write(fd, &out, sizeof(out)) < 0 && errno != ENOENT) return -1;  // ENOENT: interrupted meanwhile
  }
}

}  // namespace biofs
