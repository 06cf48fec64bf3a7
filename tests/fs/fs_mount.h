// Mounting the filesystem core in a test: no background commit (a test commits when it says
// so), and a failed mount fails the test with its one line.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "fs/filesystem.h"

namespace biofs::test {

inline std::unique_ptr<Filesystem> mount_for_test(BlockIo& io) {
  std::string err;
  MountOptions o;
  o.commit_interval_s = 0;
  std::unique_ptr<Filesystem> fs = Filesystem::mount(io, o, &err);
  REQUIRE_MESSAGE(fs, err);
  return fs;
}

}  // namespace biofs::test
