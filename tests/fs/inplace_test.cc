// The file I/O path's heap-free holder: InplaceFunction (completion callbacks held in place).
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "fs/inplace_function.h"

using namespace biofs;

namespace {
// Counts how many of its copies are alive, so a test sees each target destroyed exactly once.
struct Tracked {
  std::shared_ptr<int> alive;
  explicit Tracked(std::shared_ptr<int> a) : alive(std::move(a)) { ++*alive; }
  Tracked(const Tracked& o) : alive(o.alive) { ++*alive; }
  Tracked(Tracked&& o) noexcept : alive(o.alive) { ++*alive; }
  ~Tracked() { --*alive; }
};
}  // namespace

TEST_CASE("inplace function: calls its target with the arguments, holds five words, and is empty when moved from") {
  long seen = 0;
  uint64_t a = 1, b = 2, c = 3, d = 4;
  InplaceFunction<int(long, int)> f = [&seen, a, b, c, d](long x, int y) {
    seen = x;
    return int(a + b + c + d) + y;
  };
  REQUIRE(f);
  CHECK(f(7, 10) == 20);
  CHECK(seen == 7);
  InplaceFunction<int(long, int)> g = std::move(f);
  CHECK_FALSE(f);
  REQUIRE(g);
  CHECK(g(8, 0) == 10);
  CHECK(seen == 8);
  InplaceFunction<int(long, int)> none;
  CHECK_FALSE(none);
  none = std::move(g);
  CHECK(none);
  CHECK_FALSE(g);
}

TEST_CASE("inplace function: a target is destroyed exactly once, through moves, reassignment and reset") {
  auto alive = std::make_shared<int>(0);
  {
    InplaceFunction<void()> f = [t = Tracked(alive)] {};
    CHECK(*alive == 1);
    InplaceFunction<void()> g = std::move(f);
    CHECK(*alive == 1);  // moved: the source's copy is gone
    g = [t = Tracked(alive)] {};
    CHECK(*alive == 1);  // the old target went when the new one came
    g = nullptr;
    CHECK(*alive == 0);
    InplaceFunction<void()> h = [t = Tracked(alive)] {};
    CHECK(*alive == 1);
  }
  CHECK(*alive == 0);
}
