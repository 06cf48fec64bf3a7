// fuse-null's namespace: inodes with attributes and names, in memory, no data. The least a
// FUSE server must keep to answer what the kernel asks (lookups, attributes, directory
// listings, link counts, the lookup count of each inode it handed out); errors are positive
// errnos, as fuse_reply_err takes them.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace biofs {

class NullTree {
 public:
  static constexpr uint64_t kRoot = 1;  // FUSE_ROOT_ID
  NullTree(uid_t uid, gid_t gid);

  int lookup(uint64_t parent, const std::string& name, struct stat* st);  // counts a lookup
  void remember(uint64_t ino);                                            // a lookup more
  void forget(uint64_t ino, uint64_t n);
  int getattr(uint64_t ino, struct stat* st);
  // `to_set`: FUSE_SET_ATTR_* bits of which fields of `want` to take.
  int setattr(uint64_t ino, const struct stat& want, int to_set, struct stat* st);
  int readlink(uint64_t ino, std::string* target);
  // A new name for a new inode of `mode` (type bits included); counts a lookup.
  int make(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
           const std::string& symlink_target, struct stat* st);
  int link(uint64_t ino, uint64_t parent, const std::string& name, struct stat* st);
  int unlink(uint64_t parent, const std::string& name, bool dir);
  int rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname,
             unsigned flags);
  // Bytes of a read of `size` at `off` that lie below the end of the file.
  size_t readable(uint64_t ino, uint64_t off, size_t size);
  void wrote(uint64_t ino, uint64_t off, size_t size);  // the size grows to off + size
  // Entries from cookie `off` on (0: from the start), with ".", ".."; the callback returns
  // false when the reply is full.
  using Filler = std::function<bool(const std::string& name, const struct stat& st, uint64_t next)>;
  int readdir(uint64_t ino, uint64_t off, const Filler& fill);

 private:
  struct Node {
    struct stat st {};
    uint64_t parent = 0;  // directories: for ".."
    uint64_t lookups = 0;
    std::string target;   // symlinks
    std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> names;  // name -> ino, cookie
    std::map<uint64_t, std::string> by_cookie;                              // readdir's order
    uint64_t next_cookie = 3;                                               // 1, 2: ".", ".."
  };
  Node* find(uint64_t ino);
  void touch(Node& n, bool data);  // mtime and ctime now (data false: ctime only)
  void drop_name(Node& dir, const std::string& name);
  void maybe_free(uint64_t ino);  // no names and no lookups left

  std::mutex mu_;
  std::unordered_map<uint64_t, Node> nodes_;
  uint64_t next_ino_ = 2;
};

}  // namespace biofs
