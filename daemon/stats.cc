// The counters export (see stats.h): a JSON object built from BioSet::stats(),
// RequestQueue::counters(), the per-thread block statistics and /proc/self/statm.
#include "stats.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "blockcore/blk_mq.h"
#include "blockcore/percpu_stat.h"
#include "blockcore/stage_clock.h"

namespace biofs {

namespace {

// A small JSON writer: keys and numbers only, plus a few fixed strings.
struct Json {
  std::string s;
  bool first = true;
  void key(const char* k) {
    if (!first) s += ',';
    first = false;
    s += '"';
    s += k;
    s += "\":";
  }
  void num(const char* k, uint64_t v) {
    key(k);
    s += std::to_string(v);
  }
  void real(const char* k, double v) {
    key(k);
    char buf[32];
    snprintf(buf, sizeof(buf), "%.6g", v);
    s += buf;
  }
  void str(const char* k, const char* v) {
    key(k);
    s += '"';
    s += v;  // fixed identifiers only: no escaping needed
    s += '"';
  }
  void boolean(const char* k, bool v) {
    key(k);
    s += v ? "true" : "false";
  }
  void open(const char* k) {
    key(k);
    s += '{';
    first = true;
  }
  void close() {
    s += '}';
    first = false;
  }
};

uint64_t rss_bytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  return n == 2 ? uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE)) : 0;
}

uint64_t mono_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec);
}

}  // namespace

std::string stats_json(BlockIo& io) {
  Json j;
  j.s = "{";
  j.num("version", 1);
  j.num("pid", uint64_t(getpid()));
  j.num("time_s", mono_s());
  j.num("rss_bytes", rss_bytes());

  const BioSetStats bs = io.bio_set().stats();
  const BioCacheCounters& c = bs.total;
  j.open("bio_cache");
  j.boolean("enabled", io.bio_set().has_cache());
  j.num("alloc_hits", c.alloc_hits);
  j.num("alloc_misses", c.alloc_misses);
  const uint64_t allocs = c.alloc_hits + c.alloc_misses;
  j.real("hit_rate", allocs ? double(c.alloc_hits) / double(allocs) : 0.0);
  j.num("put_local", c.put_local);
  j.num("put_remote", c.put_remote);
  j.num("put_full", c.put_full);
  j.num("splices", c.splices);
  j.num("pruned", c.pruned);
  j.num("cached", c.cached);
  j.num("domains", bs.domains.size());
  j.num("reserve_allocs", bs.reserve_allocs);
  j.num("reserve_waits", bs.reserve_waits);
  j.num("remote_put_full", bs.remote_put_full);
  j.close();

  if (RequestQueue* q = io.bdev()->queue) {
    const QueueCounters qc = q->counters();
    j.open("queue");
    j.str("tag_batch", tag_batch_name(q->toggles().tag_batch));
    j.str("split_check", split_check_name(q->toggles().split_check));
    j.num("hw_queues", q->nr_hw_queues());
    j.num("requests", qc.requests);
    j.num("plug_flushes", qc.plug_flushes);
    j.num("split_checks", qc.split_checks);
    j.num("splits", qc.splits);
    j.num("tag_waits", qc.tag_waits);
    j.num("tag_calls", qc.tag_calls);
    j.num("tag_batch_calls", qc.tag_batch_calls);
    j.num("tags", qc.tags);
    j.real("tags_per_call", qc.tags_per_call());
    j.close();
  }

  const BlkStatSnapshot st = blk_stat_snapshot();
  j.open("io");
  j.num("reads", st.ios[0]);
  j.num("writes", st.ios[1]);
  j.num("others", st.ios[2]);
  j.num("read_bytes", st.bytes[0]);
  j.num("write_bytes", st.bytes[1]);
  j.num("errors", st.errors);
  j.num("clones", st.clones);
  j.num("fs_bios", io.bios.load(std::memory_order_relaxed));
  j.num("fs_bytes", io.bytes.load(std::memory_order_relaxed));
  j.num("fs_errors", io.errors.load(std::memory_order_relaxed));
  j.close();

  j.open("stages");
  j.num("sample", stage_clock_sample());
  for (unsigned s = 0; s < NR_STAGES; s++) {
    const StageHist& h = st.stages[s];
    j.open(stage_name(s));
    j.num("count", h.count());
    j.num("p50_ns", h.quantile(0.5));
    j.num("p99_ns", h.quantile(0.99));
    // [lowest ns of the bucket, count] for each non-empty bucket: the tools difference two
    // reads to get one run's histogram.
    // An xattr holds at most 64 KiB (XATTR_SIZE_MAX): past 48 KiB, buckets are left out (a
    // stage's list is under 12 KiB), and `buckets_dropped` says so.
    const bool room = j.s.size() < (48u << 10);
    if (!room) j.boolean("buckets_dropped", true);
    j.key("buckets");
    j.s += '[';
    bool first = true;
    for (unsigned i = 0; room && i < STAT_HIST_BUCKETS; i++) {
      if (!h.buckets[i]) continue;
      if (!first) j.s += ',';
      first = false;
      j.s += '[' + std::to_string(stat_hist_lower(i)) + ',' + std::to_string(h.buckets[i]) + ']';
    }
    j.s += ']';
    j.close();
  }
  j.close();
  j.s += "}\n";
  return j.s;
}

}  // namespace biofs
