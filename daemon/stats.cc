// The counters export (see stats.h): a JSON object (nlohmann-json) built from BioSet::stats(),
// RequestQueue::counters(), the per-thread block statistics and /proc/self/statm.
#include "stats.h"

#include "live_toggles.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "blockcore/blk_mq.h"
#include "blockcore/percpu_stat.h"
#include "blockcore/stage_clock.h"

namespace biofs {

namespace {

using Json = nlohmann::ordered_json;  // keys in the order written, as the tools print them

// A ratio as "%.6g" writes it: six significant digits, and an integer (0, 1) when that is what
// it comes to, so readers see the numbers and JSON types the counters have always had.
Json six_digits(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.6g", v);
  if (!std::strpbrk(buf, ".eEn")) return Json(int64_t(std::strtoll(buf, nullptr, 10)));
  return Json(std::strtod(buf, nullptr));
}

uint64_t rss_bytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  return n == 2 ? uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE)) : 0;
}

uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

std::string stats_json(BlockIo& io, const FuseStats* fuse, const DeviceStats* device, const IoContract* contract,
                       const LiveToggles* live) {
  Json j;
  j["version"] = 1;
  j["pid"] = uint64_t(getpid());
  // The snapshot's own instant and the daemon's CPU time at it, beside the I/O counts below: a
  // window between two snapshots (biofs-compare --live) is then timed by the daemon, not by
  // the reader, whose xattr read can wait behind a full queue.
  const uint64_t now_ns = clock_ns(CLOCK_MONOTONIC);
  j["time_s"] = now_ns / 1000000000ull;
  j["time_ns"] = now_ns;
  j["cpu_ns"] = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  j["rss_bytes"] = rss_bytes();
  if (fuse)
    j["fuse"] = {{"requested", fuse->requested}, {"transport", fuse->transport}, {"ring_sched", fuse->ring_sched},
                 {"replies_elsewhere", fuse->replies_elsewhere}, {"polled", fuse->polled},
                 {"page_drops", fuse->page_drops},
                 {"guard_boosts", fuse->guard_boosts}, {"guard_boosted", fuse->guard_boosted},
                 {"guard_io_boosts", fuse->guard_io_boosts}, {"libfuse", fuse->libfuse},
                 {"direct_io_mmap", fuse->direct_io_mmap}, {"dev_payload_aligned", fuse->dev_payload_aligned}};
  if (fuse && fuse->reactor)
    j["fuse"]["reactor"] = {{"ring_requests", fuse->reactor_requests}, {"posted_replies", fuse->reactor_posted},
                            {"hot_requests", fuse->reactor_hot},
                            {"why_not", fuse->reactor_error}, {"fixed_buffers", fuse->reactor_fixed_buffers},
                            {"fixed_buffers_why_not", fuse->reactor_fixed_error},
                            {"covering", fuse->reactor_covering}, {"device_reaps", fuse->reactor_device_reaps}};
  if (fuse) j["journal"] = {{"commits", fuse->journal_commits}};
  if (fuse) j["fs"] = {{"read_only", fuse->read_only}};
  if (contract) {
    const QueueLimits& l = contract->limits;
    Json toggles = Json::object();
    for (const auto& [name, value] : contract->toggles) toggles[name] = value;
    j["contract"] = {{"device", contract->device}, {"lba_size", contract->lba_size},
                     {"mdts_bytes", contract->mdts_bytes},
                     {"limits", {{"max_sectors", l.max_sectors}, {"max_hw_sectors", l.max_hw_sectors},
                                 {"max_segments", l.max_segments}, {"max_segment_size", l.max_segment_size},
                                 {"virt_boundary_mask", l.virt_boundary_mask}, {"dma_alignment", l.dma_alignment + 1},
                                 {"chunk_sectors", l.chunk_sectors}, {"write_cache", l.write_cache}}},
                     {"hw_queues", contract->hw_queues}, {"poll_queues", contract->poll_queues},
                     {"queue_depth", contract->queue_depth}, {"toggles", toggles},
                     {"unavailable", contract->unavailable}};
    for (const IoContract& m : contract->members)
      j["contract"]["members"].push_back(
          {{"device", m.device}, {"lba_size", m.lba_size}, {"mdts_bytes", m.mdts_bytes},
           {"max_sectors", m.limits.max_sectors}, {"max_segments", m.limits.max_segments},
           {"virt_boundary_mask", m.limits.virt_boundary_mask}, {"write_cache", m.limits.write_cache}});
  }
  if (device) {
    j["device"] = {{"name", device->name}, {"inline", device->inline_io},
                   {"inline_flush", device->inline_flush},
                   {"inline_commands", device->inline_commands}, {"host_retries", device->host_retries},
                   {"doorbells", device->doorbells}, {"cover_misses", device->cover_misses},
                   {"retries", device->retries}, {"fixed_buffer_cmds", device->fixed_buffer_cmds}};
    const EmuWriteCacheStats& w = device->write_cache;
    if (device->write_cache_bytes)
      j["device"]["write_cache"] = {{"bytes", device->write_cache_bytes}, {"writes", w.writes},
                                    {"bytes_cached", w.bytes}, {"written_back", w.written_back},
                                    {"batches", w.batches}, {"full_waits", w.full_waits},
                                    {"too_large", w.too_large}, {"read_hits", w.read_hits}, {"waits", w.waits},
                                    {"waiter_batches", w.waiter_batches}};
  }

  const BioSetStats bs = io.bio_set().stats();
  const BioCacheCounters& c = bs.total;
  const uint64_t allocs = c.alloc_hits + c.alloc_misses;
  j["bio_cache"] = {
      {"enabled", io.bio_set().has_cache()},
      {"mode", !io.bio_set().has_cache() ? "off" : io.bio_set().puts_home() ? "home" : "on"},
      {"alloc_hits", c.alloc_hits},
      {"alloc_misses", c.alloc_misses},
      {"hit_rate", six_digits(allocs ? double(c.alloc_hits) / double(allocs) : 0.0)},
      {"put_local", c.put_local},
      {"put_remote", c.put_remote},
      {"put_full", c.put_full},
      {"splices", c.splices},
      {"pruned", c.pruned},
      {"cached", c.cached},
      {"domains", uint64_t(bs.domains.size())},
      {"reserve_allocs", bs.reserve_allocs},
      {"reserve_waits", bs.reserve_waits},
      {"remote_put_full", bs.remote_put_full},
  };

  if (RequestQueue* q = io.bdev()->queue) {
    const QueueCounters qc = q->counters();
    j["queue"] = {
        {"tag_batch", tag_batch_name(q->toggles().tag_batch)},
        {"split_check", split_check_name(q->toggles().split_check)},
        {"nomerges", nomerges_name(q->toggles().nomerges)},
        {"hw_queues", q->nr_hw_queues() - q->nr_poll_queues()},
        {"poll_queues", q->nr_poll_queues()},
        {"requests", qc.requests},
        {"plug_flushes", qc.plug_flushes},
        {"split_checks", qc.split_checks},
        {"splits", qc.splits},
        {"tag_waits", qc.tag_waits},
        {"tag_calls", qc.tag_calls},
        {"tag_batch_calls", qc.tag_batch_calls},
        {"tags", qc.tags},
        {"tags_per_call", six_digits(qc.tags_per_call())},
        {"read_merges", qc.read_merges},  // /sys/block/*/stat's merge columns
        {"write_merges", qc.write_merges},
        {"discard_merges", qc.discard_merges},
    };
  }

  const BlkStatSnapshot st = blk_stat_snapshot();
  j["io"] = {
      {"reads", st.ios[0]},
      {"writes", st.ios[1]},
      {"others", st.ios[2]},
      {"read_bytes", st.bytes[0]},
      {"write_bytes", st.bytes[1]},
      {"errors", st.errors},
      {"clones", st.clones},
      {"flushes", st.flushes},
      {"fua_writes", st.fua_writes},
      {"fs_bios", io.bios.load(std::memory_order_relaxed)},
      {"fs_bytes", io.bytes.load(std::memory_order_relaxed)},
      {"fs_errors", io.errors.load(std::memory_order_relaxed)},
      {"fs_write_copies", io.write_copies.load(std::memory_order_relaxed)},
  };

  Json& stages = j["stages"];
  stages["sample"] = stage_clock_sample();
  for (unsigned s = 0; s < NR_STAGES; s++) {
    const StageHist& h = st.stages[s];
    Json& out = stages[stage_name(s)];
    out["count"] = h.count();
    out["p50_ns"] = h.quantile(0.5);
    out["p99_ns"] = h.quantile(0.99);
    // [lowest ns of the bucket, count] for each non-empty bucket: the tools difference two
    // reads to get one run's histogram.
    // An xattr holds at most 64 KiB (XATTR_SIZE_MAX): past 48 KiB, buckets are left out (a
    // stage's list is under 12 KiB), and `buckets_dropped` says so.
    const bool room = j.dump().size() < (48u << 10);
    if (!room) out["buckets_dropped"] = true;
    Json& buckets = out["buckets"] = Json::array();
    for (unsigned i = 0; room && i < STAT_HIST_BUCKETS; i++)
      if (h.buckets[i]) buckets.push_back({stat_hist_lower(i), h.buckets[i]});
  }
  if (live) j["live"] = live->stats();  // last: its keys repeat the toggles' names
  return j.dump() + "\n";
}

}  // namespace biofs
