// The transports a read or write comes over (daemon/request_transport.h): what each decides
// for it. How a reply travels is tested through the mount (tests/fs/fuse_*_test.cc, each
// transport); here, the rules that decide whether the receiving thread waits for the I/O.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "daemon/fuse_ops.h"
#include "daemon/request_transport.h"

using namespace biofs;

namespace {

const RequestTransport& named(const std::string& name, bool hot = false) {
  for (uint8_t id = 0; id < 4; id++) {
    const RequestTransport& t = RequestTransport::by_id(id);
    if (t.name() == name && (&t == &reactor_hot_transport()) == hot) return t;
  }
  FAIL("no transport named " << name);
  return reactor_hot_transport();
}

}  // namespace

TEST_CASE("request transports: each has its number, and by_id gives it back") {
  for (uint8_t id = 0; id < 4; id++) CHECK(RequestTransport::by_id(id).id() == id);
  CHECK(named("reactor", true).id() == reactor_hot_transport().id());
  CHECK(named("/dev/fuse").id() != named("libfuse ring").id());
}

TEST_CASE("request transports: a /dev/fuse worker waits for its I/O only while another worker is free") {
  const RequestTransport& dev = named("/dev/fuse");
  FuseContext ctx{};
  ctx.settings.threads = 4;
  CHECK(dev.receiver_free(ctx, 0, 0));
  CHECK(dev.receiver_free(ctx, 2, 0));   // with this one, 3 of 4 workers busy
  CHECK(!dev.receiver_free(ctx, 3, 0));  // all 4 busy
  ctx.settings.threads = 1;
  CHECK(!dev.receiver_free(ctx, 0, 0));  // a lone worker never waits: nobody would read
  CHECK(!dev.on_ring());
  CHECK(!dev.holds_reply());
  CHECK(!dev.plugs_batch());
}

TEST_CASE("request transports: libfuse's ring thread always waits and replies itself") {
  const RequestTransport& ring = named("libfuse ring");
  FuseContext ctx{};
  ctx.settings.threads = 1;
  CHECK(ring.receiver_free(ctx, 100, 5));
  CHECK(ring.holds_reply());
  CHECK(ring.on_ring());
  CHECK(!ring.plugs_batch());  // stock libfuse does not say when its batch ends
}

TEST_CASE("request transports: a reactor thread waits only when alone and no request queued behind its last 8") {
  for (bool hot : {false, true}) {
    CAPTURE(hot);
    std::thread([hot] {  // a fresh thread: the history is the thread's
      const RequestTransport& r = named("reactor", hot);
      FuseContext ctx{};
      CHECK(r.on_ring());
      CHECK(r.plugs_batch());
      CHECK(!r.holds_reply());
      CHECK(r.receiver_free(ctx, 0, 0));
      CHECK(!r.receiver_free(ctx, 1, 0));  // another read or write in the daemon
      CHECK(!r.receiver_free(ctx, 0, 2));  // two requests behind this one
      for (int i = 0; i < 7; i++) CHECK(!r.receiver_free(ctx, 0, 0));  // the backlog is recent
      CHECK(r.receiver_free(ctx, 0, 0));  // 8 quiet requests since
      // Both of the reactor's transports keep the one history of their thread.
      CHECK(!named("reactor", !hot).receiver_free(ctx, 0, 1));
      CHECK(!r.receiver_free(ctx, 0, 0));
    }).join();
  }
}
