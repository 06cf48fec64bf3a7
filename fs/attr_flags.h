// The attribute flags chattr(1) sets: immutable, append-only, nodump and noatime, kept in the
// inode's flags word (format.h, docs/format.md). Their twin is ext4's EXT4_*_FL with
// ext4_fileattr_get()/set() (fs/ext4/ioctl.c, Linux 6.18), and the VFS rules that enforce the
// first two (IS_IMMUTABLE/IS_APPEND in fs/namei.c, fs/attr.c, fs/open.c, fs/xattr.c,
// fs/open.c's vfs_fallocate()): over FUSE the kernel never sees the flags (a fuse inode has no
// S_IMMUTABLE), so each rule is the filesystem's to keep. The capability to change the first
// two (CAP_LINUX_IMMUTABLE) is checked by the VFS before the request comes.
#pragma once

#include <cstdint>

#include "fs_info.h"
#include "inode_table.h"

namespace biofs {

// setattr fields (FUSE_SET_ATTR_* values, so the daemon passes its mask through).
enum : int {
  SETATTR_MODE = 1 << 0, SETATTR_UID = 1 << 1, SETATTR_GID = 1 << 2, SETATTR_SIZE = 1 << 3,
  SETATTR_ATIME = 1 << 4, SETATTR_MTIME = 1 << 5, SETATTR_ATIME_NOW = 1 << 7,
  SETATTR_MTIME_NOW = 1 << 8, SETATTR_CTIME = 1 << 10,
};

inline bool IS_IMMUTABLE(const InodeObj* in) { return in->d.flags & disk::INODE_IMMUTABLE; }
inline bool IS_APPEND(const InodeObj* in) { return in->d.flags & disk::INODE_APPEND; }

// inode_permission(dir, MAY_WRITE) for a new name in `dir`: nothing made in an immutable one.
int may_create_in(const InodeObj* dir);
// may_delete(): a name goes from `dir` (neither immutable nor append-only) only if `victim`
// is neither.
int may_delete_from(const InodeObj* dir, const InodeObj* victim);
// vfs_link(): no new name for an immutable or append-only inode.
int may_link(const InodeObj* in);
// may_open(): no writer (nor O_TRUNC) of an immutable file; an append-only one only with
// O_APPEND and without O_TRUNC.
int may_open(const InodeObj* in, int open_flags);
// notify_change(): an immutable inode keeps every attribute; an append-only one its mode,
// owner, size and given times (setting them to now is allowed). `to_set`: SETATTR_* (above).
int may_setattr(const InodeObj* in, int to_set);
// A write: none to an immutable file, an append-only one only at its end (ext4_write_checks(),
// O_APPEND forced at open).
int may_write(const InodeObj* in, uint64_t off);
// vfs_fallocate(): none on an immutable file, only KEEP_SIZE preallocation on an append-only one.
int may_fallocate(const InodeObj* in, int mode);
// xattr_permission(): no attribute set or removed on either.
int may_change_xattrs(const InodeObj* in);

// FS_IOC_GETFLAGS / FS_IOC_SETFLAGS (FS_*_FL) and FS_IOC_FSGETXATTR / FSSETXATTR
// (FS_XFLAG_*): the flags of `ino`. A set with a flag biofs does not keep is EOPNOTSUPP; a
// change moves ctime.
int get_attr_flags(FsInfo& s, InodeTable& itable, uint64_t ino, uint32_t* fs_flags);
int set_attr_flags(FsInfo& s, InodeTable& itable, uint64_t ino, uint32_t fs_flags);
uint32_t xflags_from_fs_flags(uint32_t fs_flags);
// -1 for an xflag biofs does not keep.
int64_t fs_flags_from_xflags(uint32_t xflags);

}  // namespace biofs
