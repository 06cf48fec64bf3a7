#include "attr_flags.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#include <cerrno>
#include <mutex>

#include "inode_table.h"

namespace biofs {

using namespace disk;

namespace {

// FS_*_FL <-> INODE_* for the flags biofs keeps.
struct FlagPair {
  uint32_t fs, inode, xflag;
};
constexpr FlagPair kFlags[] = {
    {FS_IMMUTABLE_FL, INODE_IMMUTABLE, FS_XFLAG_IMMUTABLE},
    {FS_APPEND_FL, INODE_APPEND, FS_XFLAG_APPEND},
    {FS_NODUMP_FL, INODE_NODUMP, FS_XFLAG_NODUMP},
    {FS_NOATIME_FL, INODE_NOATIME, FS_XFLAG_NOATIME},
};

}  // namespace

int may_create_in(const InodeObj* dir) { return IS_IMMUTABLE(dir) ? -EPERM : 0; }

int may_delete_from(const InodeObj* dir, const InodeObj* victim) {
  if (IS_IMMUTABLE(dir) || IS_APPEND(dir)) return -EPERM;
  if (IS_IMMUTABLE(victim) || IS_APPEND(victim)) return -EPERM;
  return 0;
}

int may_link(const InodeObj* in) { return IS_IMMUTABLE(in) || IS_APPEND(in) ? -EPERM : 0; }

int may_open(const InodeObj* in, int open_flags) {
  const bool writer = (open_flags & O_ACCMODE) != O_RDONLY || (open_flags & O_TRUNC);
  if (IS_IMMUTABLE(in) && writer) return -EPERM;
  if (IS_APPEND(in)) {
    if ((open_flags & O_ACCMODE) != O_RDONLY && !(open_flags & O_APPEND)) return -EPERM;
    if (open_flags & O_TRUNC) return -EPERM;
  }
  return 0;
}

int may_setattr(const InodeObj* in, int to_set) {
  if (IS_IMMUTABLE(in) && to_set) return -EPERM;
  // FUSE's form of ATTR_TIMES_SET: a time given, not "now" (utime(path, NULL) sends _NOW).
  const bool times_given = ((to_set & SETATTR_ATIME) && !(to_set & SETATTR_ATIME_NOW)) ||
                           ((to_set & SETATTR_MTIME) && !(to_set & SETATTR_MTIME_NOW));
  if (IS_APPEND(in) && ((to_set & (SETATTR_MODE | SETATTR_UID | SETATTR_GID | SETATTR_SIZE)) || times_given))
    return -EPERM;
  return 0;
}

int may_write(const InodeObj* in, uint64_t off) {
  if (IS_IMMUTABLE(in)) return -EPERM;
  if (IS_APPEND(in) && off != in->d.size) return -EPERM;
  return 0;
}

int may_fallocate(const InodeObj* in, int mode) {
  if (IS_IMMUTABLE(in)) return -EPERM;
  if (IS_APPEND(in) && (mode & ~FALLOC_FL_KEEP_SIZE)) return -EPERM;
  return 0;
}

int may_change_xattrs(const InodeObj* in) { return IS_IMMUTABLE(in) || IS_APPEND(in) ? -EPERM : 0; }

int get_attr_flags(FsInfo& s, InodeTable& itable, uint64_t ino, uint32_t* fs_flags) {
  std::shared_lock shared(s.lock);
  InodeObj* in;
  if (int err = itable.iget_shared(shared, ino, &in)) return err;
  *fs_flags = 0;
  for (const FlagPair& f : kFlags)
    if (in->d.flags & f.inode) *fs_flags |= f.fs;
  return 0;
}

int set_attr_flags(FsInfo& s, InodeTable& itable, uint64_t ino, uint32_t fs_flags) {
  uint32_t want = 0, kept = 0;
  for (const FlagPair& f : kFlags) {
    kept |= f.fs;
    if (fs_flags & f.fs) want |= f.inode;
  }
  if (fs_flags & ~kept) return -EOPNOTSUPP;
  std::unique_lock ex(s.lock);
  if (s.read_only) return -EROFS;
  if (int err = s.commit.maybe_commit()) return err;
  InodeObj* in;
  if (int err = itable.iget(ino, &in)) return err;
  uint32_t all = 0;
  for (const FlagPair& f : kFlags) all |= f.inode;
  in->d.flags = (in->d.flags & ~all) | want;
  InodeTable::touch(in->d, false, false, true);
  // The kernel keeps the attributes it has (FUSE's fileattr_set does not drop them): the new
  // ctime must reach it, as chattr's on ext4 does (generic/277).
  if (s.opts.attrs_changed) s.opts.attrs_changed(ino);
  return itable.isave(in);
}

uint32_t xflags_from_fs_flags(uint32_t fs_flags) {
  uint32_t x = 0;
  for (const FlagPair& f : kFlags)
    if (fs_flags & f.fs) x |= f.xflag;
  return x;
}

int64_t fs_flags_from_xflags(uint32_t xflags) {
  uint32_t fs = 0, kept = 0;
  for (const FlagPair& f : kFlags) {
    kept |= f.xflag;
    if (xflags & f.xflag) fs |= f.fs;
  }
  return xflags & ~kept ? -1 : int64_t(fs);
}

}  // namespace biofs
