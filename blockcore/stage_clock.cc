// Sampled time stamps along one I/O (see stage_clock.h): the slow paths, taken only by sampled
// I/O and once per N unsampled ones.
#include "stage_clock.h"

#include <atomic>
#include <cstdlib>

namespace biofs {

constinit thread_local StageTrace tls_stage;

namespace {

unsigned initial_sample() {
  const char* env = std::getenv("BIOFS_STAGE_SAMPLE");
  if (!env || !*env) return 64;
  char* end = nullptr;
  const unsigned long n = std::strtoul(env, &end, 10);
  return (*end || n > (1ul << 30)) ? 64 : unsigned(n);
}

std::atomic<unsigned> g_sample{initial_sample()};

// With sampling off a thread still comes here once per this many I/Os, to see it turned on.
constexpr uint32_t kOffRecheck = 1u << 16;

// The sampling decision, when `countdown` ran out: true unless sampling is off. Resets it to
// the rate times `factor`.
bool sample_this(uint32_t* countdown, unsigned factor) {
  const unsigned n = g_sample.load(std::memory_order_relaxed);
  if (n == 0) {
    *countdown = kOffRecheck;
    return false;
  }
  *countdown = n * factor - 1;
  return true;
}

void start(StageTrace& t, bool from_request, uint64_t now) {
  t.on = TRACE_BIO | TRACE_DISPATCH;
  t.from_request = from_request;
  t.start_ns = t.last_ns = now;
  t.bio = nullptr;
}

}  // namespace

void stage_clock_set_sample(unsigned n) { g_sample.store(n, std::memory_order_relaxed); }
unsigned stage_clock_sample() { return g_sample.load(std::memory_order_relaxed); }

StageToken stage_request_received() {
  StageTrace& t = tls_stage;
  t.on = 0;  // a trace left by an earlier request on this thread ends here
  t.bio = nullptr;
  if (t.request_countdown-- != 0) return {};
  if (!sample_this(&t.request_countdown, 1)) return {};
  const uint64_t now = stage_now_ns();
  start(t, true, now);
  return {now};
}

void stage_request_reply(StageToken token) {
  if (!token.start_ns) return;
  const uint64_t now = stage_now_ns();
  StageTrace& t = tls_stage;
  if (t.on && t.from_request && t.start_ns == token.start_ns) {  // replied on the submitting thread
    blk_stat_record(STAGE_REPLY, now - t.last_ns);
    t.on = 0;
  }
  blk_stat_record(STAGE_REQUEST_TOTAL, now - token.start_ns);
}

void stage_trace_maybe_start() {
  StageTrace& t = tls_stage;
  if (sample_this(&t.countdown, BIO_SAMPLE_FACTOR)) start(t, false, stage_now_ns());
}

bool stage_bio_allocated_slow(Stage stage, const void* bio) {
  stage_mark_slow(stage);
  StageTrace& t = tls_stage;
  if (t.from_request || t.bio) return false;
  t.bio = bio;
  return true;
}

void stage_bio_put_slow(const void* bio) {
  StageTrace& t = tls_stage;
  if (t.bio != bio) return;  // put on another thread, or its trace already ended at dispatch
  t.on = 0;
  t.bio = nullptr;
}

void stage_mark_slow(Stage stage) {
  StageTrace& t = tls_stage;
  const uint64_t now = stage_now_ns();
  blk_stat_record(stage, now - t.last_ns);
  t.last_ns = now;
  // A bio-started trace follows one bio: after its tag, only its flush and submission.
  if (stage == STAGE_TAG && !t.from_request) t.on = TRACE_DISPATCH;
}

void stage_rqs_submitted_slow(Request* first) {
  StageTrace& t = tls_stage;
  const uint64_t now = stage_now_ns();
  blk_stat_record(STAGE_SUBMIT, now - t.last_ns);
  t.last_ns = now;
  for (Request* rq = first; rq; rq = rq->rq_next) rq->io_start_time_ns = now;
}

void stage_rq_completed_slow(Request* rq) {
  const uint64_t now = stage_now_ns();
  const uint64_t start_ns = rq->io_start_time_ns;
  rq->io_start_time_ns = 0;
  blk_stat_record(STAGE_COMPLETE, now > start_ns ? now - start_ns : 0);
}

void stage_dispatched_slow() {
  StageTrace& t = tls_stage;
  if (!t.from_request) {
    t.on = 0;
    t.bio = nullptr;
  }
}

}  // namespace biofs
