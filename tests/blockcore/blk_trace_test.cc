// blktrace (blockcore/blk_trace.h): the records a queue writes for a split, a plugged batch and
// a tag sleep, compared action by action with what this machine's kernel traced for the same
// pattern on a loop device (tests/data/kernel-blktrace/, capture.sh there); blkparse and btt
// reading the files; a full ring dropping records, not blocking.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/blk_trace.h"
#include "blockcore/null_blk.h"

using namespace biofs;
namespace fs = std::filesystem;

namespace {

alignas(PAGE_SIZE) uint8_t buf[16 * PAGE_SIZE];

// A driver that keeps what it is given until the test completes it, in one batch.
class HeldDriver : public BlkMqOps {
 public:
  blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
    std::lock_guard g(lock_);
    held_.push_back(rq);
    return BLK_STS_OK;
  }
  void queue_rqs(RqList* rqs) override {
    std::lock_guard g(lock_);
    while (Request* rq = rqs->pop()) held_.push_back(rq);
  }
  size_t held() {
    std::lock_guard g(lock_);
    return held_.size();
  }
  void complete_all(blk_status_t status = BLK_STS_OK) {
    std::vector<Request*> rqs;
    {
      std::lock_guard g(lock_);
      rqs.swap(held_);
    }
    IoCompBatch iob;
    for (Request* rq : rqs)
      if (!blk_mq_add_to_batch(rq, &iob, status)) blk_mq_end_request(rq, status);
    blk_mq_end_request_batch(&iob);
  }
  void wait_held(size_t n) {
    while (held() < n) std::this_thread::yield();
  }

 private:
  std::mutex lock_;
  std::vector<Request*> held_;
};

struct TracedQueue {
  HeldDriver driver;
  std::unique_ptr<RequestQueue> q;
  BlockDevice bdev;
  BioSet bs{16, 0, BIOSET_NEED_BVECS};
  std::atomic<int> done{0};
  fs::path dir;
  TracedQueue(unsigned depth, uint32_t max_sectors) {
    REQUIRE(bs.init() == 0);
    TagSetConfig set;
    set.queue_depth = depth;
    QueueLimits lim;
    lim.max_hw_sectors = max_sectors;
    Toggles t;
    t.tag_batch = TagBatch::off;  // io_submit's plug asks for one tag at a time (nr_ios 1)
    q = std::make_unique<RequestQueue>(lim, &driver, t);
    REQUIRE(q->init(set) == 0);
    q->set_devt(blk_trace_mkdev(259, 3));
    bdev.queue = q.get();
    bdev.capacity = 1 << 30;
    char tmpl[] = "/tmp/blk_trace_test.XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    dir = tmpl;
    BlkTraceConfig cfg;
    cfg.dir = dir;
    cfg.name = "biofs";
    cfg.device = q->devt();
    const Status s = blk_trace_setup(q.get(), cfg);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  ~TracedQueue() {
    blk_trace_remove(q.get());
    if (!getenv("KEEP")) fs::remove_all(dir);
  }
  // `sectors.size()` writes of `bytes` in one plug (one io_submit), completed in one batch;
  // then the trace is removed, so its files are whole.
  void plugged_writes(const std::vector<sector_t>& sectors, uint32_t bytes) {
    BlkPlug plug;
    blk_start_plug(&plug);
    for (sector_t s : sectors) write(s, bytes);
    blk_finish_plug(&plug);
    driver.complete_all();
    REQUIRE(done == int(sectors.size()));
    REQUIRE(blk_trace_remove(q.get()));
  }
  // A synchronous direct write, as fio's O_DIRECT writes are: REQ_OP_WRITE | REQ_SYNC.
  void write(sector_t sector, uint32_t bytes) {
    Bio* bio = bio_alloc_bioset(&bdev, uint16_t(bytes / PAGE_SIZE), REQ_OP_WRITE | REQ_SYNC, GFP_KERNEL, &bs);
    REQUIRE(bio_add_virt(bio, buf, bytes) == bytes);
    bio->bi_iter.bi_sector = sector;
    bio->bi_private = &done;
    bio->bi_end_io = [](Bio* b) {
      auto* d = static_cast<std::atomic<int>*>(b->bi_private);
      bio_put(b);
      (*d)++;
    };
    submit_bio(bio);
  }
};

struct Record {
  blk_io_trace t;
  uint64_t pdu = 0;  // the first 8 payload bytes
};

// Every record of NAME.blktrace.* in time order (blkparse's order), notes left out.
std::vector<Record> read_records(const fs::path& dir, unsigned* files = nullptr, bool allow_gaps = false) {
  std::vector<Record> all;
  unsigned n = 0;
  for (;; n++) {
    std::ifstream in(dir / ("biofs.blktrace." + std::to_string(n)), std::ios::binary);
    if (!in) break;
    uint32_t last_seq = 0;
    bool first = true;
    Record r;
    while (in.read(reinterpret_cast<char*>(&r.t), sizeof r.t)) {
      REQUIRE(r.t.magic == (BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION));
      REQUIRE(r.t.cpu == n);
      if (!first && !allow_gaps) CHECK(r.t.sequence == last_seq + 1);  // nothing dropped
      first = false;
      last_seq = r.t.sequence;
      std::vector<char> pdu(r.t.pdu_len);
      REQUIRE(in.read(pdu.data(), std::streamsize(pdu.size())));
      r.pdu = 0;
      if (pdu.size() >= 8) memcpy(&r.pdu, pdu.data(), 8);
      if (!(r.t.action & BLK_TC_ACT(BLK_TC_NOTIFY))) all.push_back(r);
    }
  }
  if (files) *files = n;
  std::stable_sort(all.begin(), all.end(), [](const Record& a, const Record& b) { return a.t.time < b.t.time; });
  return all;
}

// One record as capture.sh writes the kernel's: "Q WS 0+32", "X WS 0/8", "P", "U 12", "UT 4".
std::string describe(const Record& r) {
  static const std::map<uint32_t, std::string> letter = {
      {__BLK_TA_QUEUE, "Q"},    {__BLK_TA_BACKMERGE, "M"}, {__BLK_TA_FRONTMERGE, "F"},
      {__BLK_TA_GETRQ, "G"},    {__BLK_TA_SLEEPRQ, "S"},   {__BLK_TA_ISSUE, "D"},
      {__BLK_TA_COMPLETE, "C"}, {__BLK_TA_PLUG, "P"},      {__BLK_TA_UNPLUG_IO, "U"},
      {__BLK_TA_UNPLUG_TIMER, "UT"}, {__BLK_TA_INSERT, "I"}, {__BLK_TA_SPLIT, "X"}};
  const uint32_t act = r.t.action & 0xffff;
  const uint32_t tc = r.t.action >> BLK_TC_SHIFT;
  std::string s = letter.at(act);
  if (act == __BLK_TA_PLUG) return s;
  if (act == __BLK_TA_UNPLUG_IO || act == __BLK_TA_UNPLUG_TIMER)
    return s + " " + std::to_string(__builtin_bswap64(r.pdu));
  std::string rwbs = (tc & BLK_TC_WRITE) ? "W" : "R";
  if (tc & BLK_TC_SYNC) rwbs += "S";
  s += " " + rwbs + " " + std::to_string(r.t.sector);
  if (act == __BLK_TA_SPLIT) return s + "/" + std::to_string(__builtin_bswap64(r.pdu));
  return s + "+" + std::to_string(r.t.bytes >> 9);
}

std::vector<std::string> describe_all(const std::vector<Record>& recs, const std::string& drop) {
  std::vector<std::string> out;
  for (const Record& r : recs) {
    std::string d = describe(r);
    if (d.substr(0, d.find(' ')) != drop) out.push_back(d);
  }
  return out;
}

std::vector<std::string> kernel_reference(const std::string& name, const std::string& drop = "") {
  std::ifstream in(std::string(BIOFS_SOURCE_DIR) + "/tests/data/kernel-blktrace/" + name + ".txt");
  REQUIRE(in);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.substr(0, line.find(' ')) != drop) out.push_back(line);
  return out;
}

std::string join(const std::vector<std::string>& v);

// The traced queue's records against the kernel's for the same pattern, each side's own
// actions (`drop_biofs`, `drop_kernel`) left out.
void check_against_kernel(const TracedQueue& t, const std::string& pattern, const std::string& drop_biofs = "",
                          const std::string& drop_kernel = "") {
  const auto got = describe_all(read_records(t.dir), drop_biofs);
  const auto want = kernel_reference(pattern, drop_kernel);
  CHECK_MESSAGE(got == want, "biofs:  " << join(got) << "\nkernel: " << join(want));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "; ";
  return s;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char line[512];
  while (fgets(line, sizeof line, p)) out += line;
  pclose(p);
  return out;
}

bool have(const char* tool) { return run(std::string("command -v ") + tool + " 2>/dev/null").size() > 0; }

}  // namespace

TEST_CASE("a split: three 16 KiB writes on a queue of 4 KiB requests trace as the kernel's do") {
  TracedQueue t(64, 8);
  t.plugged_writes({0, 64, 128}, 16384);
  check_against_kernel(t, "split");
}

TEST_CASE("a plugged batch: four 4 KiB writes trace as the kernel's do, one unplug of depth 4") {
  TracedQueue t(64, 255);
  t.plugged_writes({0, 16, 32, 48}, 4096);
  check_against_kernel(t, "plugged");
}

TEST_CASE("back merges: three adjacent 4 KiB writes trace as the kernel's do, one request of 24 sectors") {
  TracedQueue t(64, 255);
  t.plugged_writes({0, 8, 16}, 4096);
  check_against_kernel(t, "merge");
}

// blk_add_rq_to_plug: a plug holding BLK_MAX_REQUEST_COUNT requests is flushed before the next
// joins it, and that one starts the list again: U 32, its 32 issues, then P.
TEST_CASE("a full plug: the 33rd request flushes 32 (U 32) and starts the list again (P)") {
  TracedQueue t(64, 255);
  std::vector<sector_t> sectors;
  for (sector_t s = 0; s < 33 * 16; s += 16) sectors.push_back(s);
  t.plugged_writes(sectors, 4096);
  const auto all = describe_all(read_records(t.dir), "");
  const auto u32 = std::find(all.begin(), all.end(), "U 32");
  REQUIRE(u32 != all.end());
  CHECK(*(u32 - 1) == "G WS 512+8");  // the 33rd write has its request, then the flush
  auto next = u32 + 1;
  while (next != all.end() && (*next)[0] == 'D') next++;
  CHECK(next - u32 == 33);
  REQUIRE(next != all.end());
  CHECK(*next == "P");
  CHECK(std::count(all.begin(), all.end(), "P") == 2);
  CHECK(std::count(all.begin(), all.end(), "U 1") == 1);  // blk_finish_plug: the 33rd alone
}

// v6.18 blk_mq_dispatch_list: a plug that holds two queues' requests is unplugged per queue,
// each queue's U carrying its own depth, not the plug's.
TEST_CASE("a plug over two queues: each queue's unplug carries its own depth") {
  TracedQueue a(64, 255), b(64, 255);
  BlkPlug plug;
  blk_start_plug(&plug);
  a.write(0, 4096);
  b.write(0, 4096);
  a.write(16, 4096);
  b.write(16, 4096);
  a.write(32, 4096);
  blk_finish_plug(&plug);
  a.driver.complete_all();
  b.driver.complete_all();
  REQUIRE(blk_trace_remove(a.q.get()));
  REQUIRE(blk_trace_remove(b.q.get()));
  const auto ra = describe_all(read_records(a.dir), ""), rb = describe_all(read_records(b.dir), "");
  CHECK(std::count(ra.begin(), ra.end(), "U 3") == 1);
  CHECK(std::count(rb.begin(), rb.end(), "U 2") == 1);
}

// The fifth write finds no tag: the plug is flushed on the way to sleep (UT 4), the sleeper gets
// its tag once the first four complete. Two departures, named in blk_trace.h: biofs records the
// sleep (S; v6.18 has no block_sleeprq) and has no insert (I) since it dispatches the flushed
// requests itself. Each side's own records are left out; the rest must be the kernel's, in order.
TEST_CASE("a tag sleep: eight writes on four tags trace as the kernel's do, the flush before the sleep as UT") {
  TracedQueue t(4, 255);
  std::thread submitter([&] {
    BlkPlug plug;
    blk_start_plug(&plug);
    for (sector_t s = 0; s < 128; s += 16) t.write(s, 4096);
    blk_finish_plug(&plug);
  });
  t.driver.wait_held(4);  // flushed by the fifth write's sleep
  t.driver.complete_all();
  t.driver.wait_held(4);  // the second four, at blk_finish_plug
  submitter.join();
  t.driver.complete_all();
  REQUIRE(t.done == 8);
  REQUIRE(blk_trace_remove(t.q.get()));
  check_against_kernel(t, "tagsleep", "S", "I");
  const auto recs = read_records(t.dir);
  // The sleep itself: one S, for the fifth write (sector 64), just before the UT.
  const auto all = describe_all(recs, "");
  const auto s = std::find(all.begin(), all.end(), "S WS 64+8");
  REQUIRE(s != all.end());
  CHECK(*(s + 1) == "UT 4");
  CHECK(std::count_if(all.begin(), all.end(), [](const std::string& x) { return x[0] == 'S'; }) == 1);
}

TEST_CASE("a completion error is in the C record, as a negative errno the kernel's way") {
  TracedQueue t(64, 255);
  t.write(8, 4096);  // no plug: dispatched at once
  t.driver.complete_all(BLK_STS_IOERR);
  REQUIRE(blk_trace_remove(t.q.get()));
  const auto recs = read_records(t.dir);
  REQUIRE(recs.size() == 4);  // Q G D C
  CHECK(describe(recs[2]) == "D WS 8+8");
  CHECK(recs[3].t.error == uint16_t(-EIO));
  CHECK(recs[1].t.device == blk_trace_mkdev(259, 3));
}

TEST_CASE("blkparse reads the files: the split writes counted as the kernel counts them") {
  if (!have("blkparse")) {
    MESSAGE("skipped: blkparse not installed (Debian's blktrace package)");
    return;
  }
  TracedQueue t(64, 8);
  t.plugged_writes({0, 64, 128}, 16384);
  const std::string out = run("blkparse -i biofs -D " + t.dir.string() + " 2>&1");
  INFO(out);
  // Its per-device summary: 3 bios queued, split into 12 requests, issued and completed; one
  // explicit unplug; no sequence gaps; the thread named from its process note.
  CHECK(out.find("259,3 ") != std::string::npos);
  CHECK(out.find("Writes Queued:           3,       48KiB") != std::string::npos);
  CHECK(out.find("Write Dispatches:       12,       48KiB") != std::string::npos);
  CHECK(out.find("Writes Completed:       12,       48KiB") != std::string::npos);
  CHECK(out.find("IO unplugs:             1") != std::string::npos);
  CHECK(out.find("Skips: 0 forward") != std::string::npos);
  CHECK(out.find("[blk_trace_test]") != std::string::npos);
}

TEST_CASE("btt reads blkparse's dump: D2C and Q2C for every request") {
  if (!have("blkparse") || !have("btt")) {
    MESSAGE("skipped: blkparse/btt not installed (Debian's blktrace package)");
    return;
  }
  TracedQueue t(64, 255);
  t.plugged_writes({0, 16, 32, 48}, 4096);
  const std::string d = t.dir.string();
  run("blkparse -q -i biofs -D " + d + " -d " + d + "/all.bin >/dev/null 2>&1");
  const std::string btt = run("cd " + d + " && btt -i all.bin 2>&1");  // btt writes .dat files where it runs
  INFO(btt);
  auto samples = [&](const std::string& name) {  // the N column of the ALL table's row
    std::istringstream in(btt);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(name + " ", 0) == 0) return line.substr(line.find_last_of(' ') + 1);
    return std::string("(no row)");
  };
  CHECK(samples("Q2G") == "4");
  CHECK(samples("D2C") == "4");
  CHECK(samples("Q2C") == "4");
}

// A ring of 16 records whose writer's timer never fires within a test.
static BlkTraceConfig sixteen_record_ring(const std::string& dir) {
  BlkTraceConfig cfg;
  cfg.dir = dir;
  cfg.name = "biofs";
  cfg.ring_records = 16;
  cfg.drain_ms = 600'000;
  return cfg;
}

TEST_CASE("a full ring drops records and counts them, never waits, and the sequence numbers show the gap") {
  TracedQueue t(64, 255);
  REQUIRE(blk_trace_remove(t.q.get()));
  BlkTraceConfig cfg = sixteen_record_ring(t.dir);  // the writer empties the ring only at the end: no timer, no kick
  cfg.kick_at_half = false;
  REQUIRE(blk_trace_setup(t.q.get(), cfg).ok());
  for (int i = 0; i < 64; i++) t.write(sector_t(i) * 16, 4096);  // never waits on the trace
  t.driver.complete_all();
  BlkTraceStats st;
  REQUIRE(blk_trace_remove(t.q.get(), &st));
  CHECK(st.records == 16);  // the thread's note and the first 15 records
  CHECK(st.dropped == 64 * 4 - 15);  // Q G D C per write
  // The sequence numbers count the dropped records: the file jumps from the 15th to the last.
  unsigned files = 0;
  const auto recs = read_records(t.dir, &files, /*allow_gaps=*/true);
  REQUIRE(recs.size() == 15);
  CHECK(recs[14].t.sequence == 15);
}

TEST_CASE("a half-full ring wakes the writer before its timer") {
  TracedQueue t(64, 255);
  REQUIRE(blk_trace_remove(t.q.get()));
  BlkTraceConfig cfg = sixteen_record_ring(t.dir);  // the timer never fires here: only the kick can wake the writer
  REQUIRE(blk_trace_setup(t.q.get(), cfg).ok());
  for (int i = 0; i < 2; i++) t.write(sector_t(i) * 16, 4096);  // the note and 8 records: half the ring
  t.driver.complete_all();
  const fs::path file = fs::path(t.dir) / "biofs.blktrace.0";
  // A property, not a timing: the records reach the file while the trace runs (however loaded
  // the machine, well inside the timer's 10 minutes).
  bool written = false;
  for (int i = 0; i < 1000 && !written; i++) {
    std::error_code ec;
    written = fs::file_size(file, ec) >= 8 * sizeof(blk_io_trace);
    if (!written) usleep(10000);
  }
  CHECK(written);
  BlkTraceStats st;
  REQUIRE(blk_trace_remove(t.q.get(), &st));
  CHECK(st.dropped == 0);
}

TEST_CASE("setup: a directory that does not exist is one line of error, and a queue is traced once") {
  HeldDriver driver;
  RequestQueue q(QueueLimits{}, &driver);
  REQUIRE(q.init(TagSetConfig{}) == 0);
  BlkTraceConfig cfg;
  cfg.dir = "/nonexistent/biofs-trace";
  cfg.name = "biofs";
  const Status s = blk_trace_setup(&q, cfg);
  REQUIRE(!s.ok());
  CHECK(s.message().find("/nonexistent/biofs-trace/biofs.blktrace.0") != std::string::npos);
  CHECK(q.blk_trace() == nullptr);
  cfg.dir = "/tmp";
  cfg.name = "blk_trace_test_once." + std::to_string(getpid());
  REQUIRE(blk_trace_setup(&q, cfg).ok());
  CHECK(blk_trace_setup(&q, cfg).code() == Status::Code::busy);
  CHECK(blk_trace_remove(&q));
  CHECK(!blk_trace_remove(&q));
  fs::remove(fs::path("/tmp") / (cfg.name + ".blktrace.0"));
}

// Four submitting threads and a writer draining every millisecond: each thread's file holds its
// note and every one of its records, in sequence, nothing lost or doubled (TSan runs this too).
TEST_CASE("concurrent: four threads trace into their own rings while the writer drains them") {
  NullBlkConfig nc;
  nc.queue_depth = 64;
  std::unique_ptr<NullBlk> dev_owner;
  REQUIRE(NullBlk::create(nc, &dev_owner).ok());
  NullBlk& dev = *dev_owner;
  char tmpl[] = "/tmp/blk_trace_test.XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const fs::path dir = tmpl;
  BlkTraceConfig cfg;
  cfg.dir = dir;
  cfg.name = "biofs";
  cfg.drain_ms = 1;
  REQUIRE(blk_trace_setup(dev.queue(), cfg).ok());
  CHECK(tracing_on());
  constexpr int kThreads = 4, kIos = 2000;
  BioSet bs(64, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIos; i++) {
        Bio* bio = bio_alloc_bioset(dev.bdev(), 1, REQ_OP_READ, GFP_KERNEL, &bs);
        bio_add_virt(bio, buf, 4096);
        bio->bi_iter.bi_sector = sector_t(t * kIos + i) * 8;
        bio->bi_private = &done;
        bio->bi_end_io = [](Bio* b) {
          auto* d = static_cast<std::atomic<int>*>(b->bi_private);
          bio_put(b);
          (*d)++;
        };
        submit_bio(bio);
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(done == kThreads * kIos);
  BlkTraceStats st;
  REQUIRE(blk_trace_remove(dev.queue(), &st));
  CHECK_FALSE(tracing_on());
  CHECK(st.dropped == 0);
  CHECK(st.records == uint64_t(kThreads) * (1 + 4 * kIos));  // a note, then Q G D C per read
  unsigned files = 0;
  const auto recs = read_records(dir, &files);  // checks each file's sequence has no gap
  CHECK(files == kThreads);
  CHECK(recs.size() == size_t(kThreads) * 4 * kIos);
  std::map<std::string, int> per_action;
  for (const Record& r : recs) per_action[describe(r).substr(0, 1)]++;
  CHECK(per_action["Q"] == kThreads * kIos);
  CHECK(per_action["C"] == kThreads * kIos);
  fs::remove_all(dir);
}
