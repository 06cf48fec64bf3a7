// USDT probes: <sys/sdt.h> from systemtap (Debian's systemtap-sdt-dev), which bpftrace, perf and
// bcc attach to (`usdt:BINARY:block:block_rq_issue`), and the one gate every tracepoint tests.
//
// The gate is a 32-bit word: its low half is the probes' USDT semaphore, which the kernel
// raises for as long as a tracer is attached to any of them (uprobes' reference counter: every
// probe's semaphore is this same half-word), its high half counts the queues with blktrace on
// (blk_trace.h). With nothing attached and no blktrace a tracepoint costs one compare with
// memory and a branch not taken, as the kernel's static-key tracepoints cost a nop; its
// arguments are gathered only behind the gate. Built without sdt.h (-DBIOFS_USDT=OFF) the probes
// are nothing and the gate counts blktrace only.
#pragma once

#include <cstdint>

#if defined(BIOFS_USDT) && BIOFS_USDT && __has_include(<sys/sdt.h>)
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
#define BIOFS_PROBE(provider, name, ...) STAP_PROBEV(provider, name, ##__VA_ARGS__)
#define BIOFS_HAS_USDT 1
#else
#define BIOFS_PROBE(provider, name, ...) \
  do {                                   \
  } while (0)
#define BIOFS_HAS_USDT 0
#endif

extern "C" volatile uint32_t biofs_trace_gate;  // usdt.cc

#if BIOFS_HAS_USDT
// Every probe's semaphore, named as sdt.h names it: each an alias of the gate's low half (usdt.cc).
extern "C" {
extern volatile unsigned short block_block_bio_queue_semaphore, block_block_split_semaphore,
    block_block_bio_backmerge_semaphore, block_block_bio_frontmerge_semaphore, block_block_getrq_semaphore,
    block_block_sleeprq_semaphore, block_block_plug_semaphore, block_block_unplug_semaphore,
    block_block_rq_issue_semaphore, block_block_rq_complete_semaphore, nvme_nvme_setup_cmd_semaphore,
    nvme_nvme_complete_rq_semaphore, fuse_fuse_request_receive_semaphore, fuse_fuse_request_reply_semaphore;
}
#endif

namespace biofs {

// True while a tracer is attached to a probe or a queue has blktrace on.
// A relaxed atomic load (a plain load on x86): the word changes under the process, by the
// kernel and by blktrace's setup, and the thread sanitizer is to see a load that may race.
inline bool tracing_on() { return __atomic_load_n(&biofs_trace_gate, __ATOMIC_RELAXED) != 0; }
// blktrace's half of the gate: +1 at a queue's setup, -1 at its removal.
void trace_gate_blktrace(int delta);

}  // namespace biofs
