// A RAM disk for a test's fixture: BrdDevice::create(), and the test stops if it fails.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>

#include "blockcore/brd.h"

namespace biofs::test {

inline std::unique_ptr<BrdDevice> make_test_brd(uint64_t bytes) {
  std::unique_ptr<BrdDevice> dev;
  const Status s = BrdDevice::create(bytes, &dev);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return dev;
}

}  // namespace biofs::test
