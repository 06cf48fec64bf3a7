// Counterpart of kernel/trace/blktrace.c and include/trace/events/block.h (v6.18): the block
// tracepoints, fired where the kernel fires them, feeding two consumers:
//  - blktrace: a queue set up with blk_trace_setup() writes struct blk_io_trace records
//    (blk_trace_api.h) into NAME.blktrace.CPU files that blkparse and btt read unchanged;
//  - USDT probes of the tracepoints' names and arguments (`usdt:BIN:block:block_rq_issue`),
//    for bpftrace and perf (usdt.h), whether or not blktrace is on.
//
// Where each record is made (the kernel's function in brackets):
//   Q  block_bio_queue     a bio enters the queue              (submit_bio_noacct_nocheck)
//   X  block_split         a bio is split to the limits; pdu: the remainder's sector
//                                                             (bio_submit_split)
//   M/F block_bio_back/frontmerge  a bio joins a plugged request (bio_attempt_back/front_merge)
//   G  block_getrq         the bio has a request              (blk_mq_submit_bio)
//   S  block_sleeprq       the bio waits for a tag            (biofs: see below)
//   P  block_plug          a request starts a plug's list     (blk_add_rq_to_plug)
//   U  block_unplug        the plug is flushed; pdu: its depth; UT when flushed on the way to
//                          sleep (from_schedule: blktrace's "timer" unplug) (blk_mq_flush_plug_list)
//   D  block_rq_issue      the request goes to the driver     (blk_mq_start_request)
//   C  block_rq_complete   it completed, with its error        (blk_update_request)
// Departures: S is biofs's: v6.18 has no block_sleeprq tracepoint (it went with the legacy
// request path), but a tag wait is what tag_batch changes, so biofs records it; blkparse prints
// it. No I (block_rq_insert): the kernel inserts a plug flushed from schedule() into the
// hardware queue and runs it from kblockd, biofs dispatches it directly (blk_mq.cc,
// __blk_flush_plug), so there is no insert to record. D is recorded by the core as it hands
// the requests to the driver, not by each driver's queue_rq.
//
// The "CPU" of a record is the writing thread's slot in the trace (one file per thread that
// traced, numbered from 0 as blkparse wants): a thread's records are in time order in its file
// and its sequence numbers count every record it made, so blkparse's skip count is the records
// a full buffer dropped. Nothing on the I/O path blocks: each thread writes into its own ring,
// and a writer thread drains the rings into the files; a full ring drops the record and counts it.
//
// Cost with tracing off: per tracepoint one compare of the gate word (usdt.h) and a branch not
// taken; with it on, the probe and the queue's q->blk_trace() load, out of line
// (docs/tracing.md has the instructions per I/O).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "blk_mq.h"
#include "blk_trace_api.h"
#include "lib/status.h"
#include "request.h"
#include "usdt.h"

namespace biofs {

struct BlkTraceConfig {
  std::string dir;   // an existing directory
  std::string name;  // the files are NAME.blktrace.0, .1, ... (blkparse -i NAME -D DIR)
  uint32_t device = blk_trace_mkdev(259, 0);  // the records' device: blkext's major, as an NVMe namespace's
  unsigned ring_records = 1u << 16;           // per thread, a power of two
  unsigned drain_ms = 5;                      // how often the writer empties the rings
  bool kick_at_half = true;                   // and whenever a ring is half full (off: its timer alone)
};

struct BlkTraceStats {
  uint64_t records = 0;  // written to the files
  uint64_t dropped = 0;  // lost to a full ring
  unsigned files = 0;
};

class BlkTrace;

// BLKTRACESETUP + BLKTRACESTART: from now on the queue's tracepoints write records. Fails with
// one line if the queue is already traced or the directory cannot take the files.
Status blk_trace_setup(RequestQueue* q, const BlkTraceConfig& cfg);
// BLKTRACESTOP + BLKTRACETEARDOWN: no new records; what the rings hold goes to the files, which
// are closed. A thread still inside a tracepoint finishes into memory the queue keeps until it
// is destroyed. False if the queue was not traced.
bool blk_trace_remove(RequestQueue* q, BlkTraceStats* stats = nullptr);

// ---- the tracepoints: the gate inline (usdt.h), the rest out of line in blk_trace.cc ----
// Each fires its USDT probe (arguments in the kernel tracepoint's order, biofs's extras after)
// and, on a queue with blktrace on, writes its record.
namespace tracepoint {
[[gnu::cold]] void block_bio_queue(RequestQueue* q, const Bio* bio);
[[gnu::cold]] void block_split(RequestQueue* q, const Bio* bio, sector_t new_sector);
[[gnu::cold]] void block_bio_backmerge(RequestQueue* q, const Bio* bio);
[[gnu::cold]] void block_bio_frontmerge(RequestQueue* q, const Bio* bio);
[[gnu::cold]] void block_getrq(RequestQueue* q, const Bio* bio);
[[gnu::cold]] void block_sleeprq(RequestQueue* q, const Bio* bio);
[[gnu::cold]] void block_plug(RequestQueue* q);
[[gnu::cold]] void block_unplug(RequestQueue* q, unsigned depth, bool explicit_unplug);
[[gnu::cold]] void block_rq_issue_list(Request* first);  // every request of the list
[[gnu::cold]] void block_rq_complete(Request* rq, blk_status_t status);
}  // namespace tracepoint

inline void trace_block_bio_queue(RequestQueue* q, const Bio* bio) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_bio_queue(q, bio);
}
// `bio` is the part split off (it goes on now), `new_sector` where the rest starts.
inline void trace_block_split(RequestQueue* q, const Bio* bio, sector_t new_sector) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_split(q, bio, new_sector);
}
inline void trace_block_bio_backmerge(RequestQueue* q, const Bio* bio) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_bio_backmerge(q, bio);
}
inline void trace_block_bio_frontmerge(RequestQueue* q, const Bio* bio) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_bio_frontmerge(q, bio);
}
inline void trace_block_getrq(RequestQueue* q, const Bio* bio) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_getrq(q, bio);
}
inline void trace_block_sleeprq(RequestQueue* q, const Bio* bio) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_sleeprq(q, bio);
}
inline void trace_block_plug(RequestQueue* q) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_plug(q);
}
inline void trace_block_unplug(RequestQueue* q, unsigned depth, bool explicit_unplug) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_unplug(q, depth, explicit_unplug);
}
// Every request of a list the core hands to the driver.
inline void trace_block_rq_issue_list(Request* first) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_rq_issue_list(first);
}
inline void trace_block_rq_complete(Request* rq, blk_status_t status) {
  if (tracing_on()) [[unlikely]]
    tracepoint::block_rq_complete(rq, status);
}

}  // namespace biofs
