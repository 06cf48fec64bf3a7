// A directory's blocks of rec_len-chained entries (format.h), indexed in memory by name the
// first time the directory is used (fs/ext4/namei.c's entry helpers).
#pragma once

#include <cstdint>
#include <string>

#include "extent_map.h"
#include "fs_info.h"

namespace biofs {

class Dir {
 public:
  Dir(FsInfo& s, ExtentMap& extents) : s_(s), extents_(extents) {}

  int dir_load(InodeObj* dir);
  int dir_find(InodeObj* dir, const std::string& name, InodeObj::DirLoc* loc);
  int dir_add(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type);
  int dir_remove(InodeObj* dir, const std::string& name);
  // Points the existing entry `name` at another inode in place (ext4_setent): needs no space,
  // so a rename over an existing name cannot fail half-way for want of a block.
  int dir_replace(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type);
  bool dir_empty(InodeObj* dir);

 private:
  FsInfo& s_;
  ExtentMap& extents_;
};

}  // namespace biofs
