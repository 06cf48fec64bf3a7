// The namespace operations (fs/namei.c, fs/ext4/namei.c): lookup, create, link, unlink,
// rename, readdir, readlink.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <string>

#include "dir.h"
#include "evict.h"
#include "file_io.h"
#include "fs_info.h"

namespace biofs {

class Namei {
 public:
  Namei(FsInfo& s, InodeTable& itable, Dir& dirs, ExtentMap& extents, FileIo& file_io, Xattr& xattrs, Evict& evict)
      : s_(s), itable_(itable), dirs_(dirs), extents_(extents), file_io_(file_io), xattrs_(xattrs), evict_(evict) {}

  // +1 lookup count. "." and ".." are the kernel's export operations (FUSE_CAP_EXPORT_SUPPORT:
  // fuse_get_dentry() and fuse_get_parent(), fs/fuse/inode.c, v6.18): `parent` is then any
  // inode by number, or a directory whose parent is wanted; -ESTALE for a number no linked
  // file has (ext4_nfs_get_inode()).
  int lookup(uint64_t parent, const std::string& name, struct stat* st);
  uint32_t generation(uint64_t ino);  // of a known inode (FUSE's entry generation), else 0
  int mknod(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev, struct stat* st,
            mode_t umask);
  int mkdir(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, struct stat* st,
            mode_t umask);
  int symlink(uint64_t parent, const std::string& name, const std::string& target, uid_t uid, gid_t gid, struct stat* st);
  int readlink(uint64_t ino, std::string* target);
  // O_TMPFILE (ext4_tmpfile): a regular file with no name, on the orphan list from the start, so
  // a crash before it is linked or closed frees it at the next mount. +1 lookup count.
  int tmpfile(uint64_t parent, mode_t mode, uid_t uid, gid_t gid, struct stat* st, mode_t umask);
  // Linking a file with no links (an O_TMPFILE one; the VFS refuses any other) takes it off the
  // orphan list, as ext4's __ext4_link does.
  int link(uint64_t ino, uint64_t newparent, const std::string& newname, struct stat* st);
  int unlink(uint64_t parent, const std::string& name);
  int rmdir(uint64_t parent, const std::string& name);
  // RENAME_NOREPLACE, RENAME_EXCHANGE, and RENAME_WHITEOUT (ext4_rename's whiteout: the old name
  // is left naming a new 0:0 character device owned by uid:gid, what overlayfs reads as
  // "deleted below"; the VFS has already checked CAP_MKNOD and refused it beside EXCHANGE).
  int rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname, unsigned flags,
             uid_t uid = 0, gid_t gid = 0);
  int readdir(uint64_t ino, uint64_t off,
              const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn);

 private:
  // The listing from `off` on, under the exclusive lock.
  int iterate_dir(InodeObj* dir, uint64_t off,
                  const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn);
  int make_node(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
                const std::string* symlink_target, struct stat* st, mode_t umask = 0);
  int new_child(InodeObj* dir, mode_t mode, uid_t uid, gid_t gid, mode_t umask, bool inherit_acl, InodeObj** out,
                int* store_err);
  int remove_entry(uint64_t parent, const std::string& name, bool want_dir);
  // Removes `name` (naming `victim`) from `dir`: a directory must be empty and loses all its
  // links (and `dir` the one its ".." held), a file loses one. Saves the victim, not `dir`.
  int drop_entry(InodeObj* dir, const std::string& name, InodeObj* victim);
  // The link bookkeeping of losing one name: a directory loses all its links (and `dir` the
  // one its ".." held), a file one. Saves the victim.
  int drop_links(InodeObj* dir, InodeObj* victim);

  FsInfo& s_;
  InodeTable& itable_;
  Dir& dirs_;
  ExtentMap& extents_;
  FileIo& file_io_;
  Xattr& xattrs_;
  Evict& evict_;
};

}  // namespace biofs
