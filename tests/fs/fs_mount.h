// Mounting the filesystem core in a test: no background commit (a test commits when it says
// so), and a failed mount fails the test with its one line.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "fs/filesystem.h"

namespace biofs::test {

inline std::unique_ptr<Filesystem> mount_for_test(BlockIo& io) {
  MountOptions o;
  o.commit_interval_s = 0;
  std::unique_ptr<Filesystem> fs;
  const Status s = Filesystem::mount(io, o, &fs);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return fs;
}

}  // namespace biofs::test
