// The transport decision made before mounting (daemon/fuse_transport.h), against a stand-in for
// the fuse module's enable_uring parameter (BIOFS_FUSE_URING_PARAM).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/fuse_transport.h"

using namespace biofs;

namespace {

struct FakeParam {
  std::string path;
  explicit FakeParam(const char* content) {
    char tmpl[] = "/tmp/biofs-enable-uring-XXXXXX";
    const int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    close(fd);
    path = tmpl;
    if (content) std::ofstream(path) << content;
    else unlink(path.c_str());
    setenv("BIOFS_FUSE_URING_PARAM", path.c_str(), 1);
  }
  ~FakeParam() {
    unlink(path.c_str());
    unsetenv("BIOFS_FUSE_URING_PARAM");
  }
  std::string value() const {
    std::string v;
    std::ifstream(path) >> v;
    return v;
  }
};

}  // namespace

TEST_CASE("fuse_uring=off never asks, whatever the kernel offers") {
  FakeParam p("Y\n");
  bool use = true;
  std::string note;
  CHECK(decide_fuse_uring(FuseUring::off, &use, &note).ok());
  CHECK_FALSE(use);
  CHECK(note.empty());
}

TEST_CASE("a kernel with the parameter on: on and auto both ask, libfuse where this build's libfuse has a ring") {
  FakeParam p("Y\n");
  std::vector<FuseUring> ask{FuseUring::on, FuseUring::auto_};
  if (BIOFS_LIBFUSE_HAS_URING) ask.push_back(FuseUring::libfuse);
  for (FuseUring w : ask) {
    bool use = false;
    std::string note;
    CHECK(decide_fuse_uring(w, &use, &note).ok());
    CHECK(use);
    CHECK(note.empty());
  }
}

TEST_CASE("a kernel without FUSE-over-io_uring: on stops the mount, auto falls back and says why") {
  FakeParam p(nullptr);
  bool use = true;
  std::string note;
  const std::string why = decide_fuse_uring(FuseUring::on, &use, &note).message();
  CHECK(why.find("fuse_uring=on: this kernel has no FUSE-over-io_uring") == 0);
  CHECK(why.find(p.path) != std::string::npos);
  CHECK_FALSE(use);
  use = true;
  CHECK(decide_fuse_uring(FuseUring::auto_, &use, &note).ok());
  CHECK_FALSE(use);
  CHECK(note.find("fuse_uring=auto: using /dev/fuse") == 0);
  CHECK(note.find('\n') == std::string::npos);  // one line
}

TEST_CASE("the parameter off: root switches it on and says so, others fall back") {
  FakeParam p("N\n");
  bool use = false;
  std::string note;
  const std::string why = decide_fuse_uring(FuseUring::auto_, &use, &note).message();
  CHECK(why.empty());
  if (geteuid() == 0) {
    CHECK(use);
    CHECK(p.value() == "Y");
    CHECK(note.find("switched on the fuse module's enable_uring") != std::string::npos);
  } else {
    CHECK_FALSE(use);
    CHECK(p.value() == "N");
    CHECK(note.find("only root may switch it on") != std::string::npos);
  }
}

TEST_CASE("a build whose libfuse has no ring: fuse_uring=libfuse stops the mount and says why, on needs none") {
  if (BIOFS_LIBFUSE_HAS_URING) {
    MESSAGE("skipped: this build's libfuse has its io_uring transport (tools/build-libfuse.sh)");
    return;
  }
  FakeParam p("Y\n");  // the kernel offers it
  bool use = true;
  std::string note;
  const std::string why = decide_fuse_uring(FuseUring::libfuse, &use, &note).message();
  CHECK(why.find("fuse_uring=libfuse: this build's libfuse " BIOFS_LIBFUSE_VERSION " has no FUSE-over-io_uring") == 0);
  CHECK_FALSE(use);
  CHECK(decide_fuse_uring(FuseUring::on, &use, &note).ok());  // the reactor
  CHECK(use);
}

TEST_CASE("parse_fuse_uring takes on (or reactor), off, auto and libfuse only") {
  FuseUring v = FuseUring::off;
  CHECK(parse_fuse_uring("reactor", &v));
  CHECK(std::string(fuse_uring_name(v)) == "on");
  CHECK(parse_fuse_uring("libfuse", &v));
  CHECK(std::string(fuse_uring_name(v)) == "libfuse");
  CHECK(parse_fuse_uring("auto", &v));
  CHECK(v == FuseUring::auto_);
  CHECK(std::string(fuse_uring_name(v)) == "auto");
  CHECK_FALSE(parse_fuse_uring("ON", &v));
  CHECK_FALSE(parse_fuse_uring("", &v));
  CHECK(v == FuseUring::auto_);
}
