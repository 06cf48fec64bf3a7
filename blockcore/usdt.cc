// The tracepoints' gate (usdt.h): one word, its low half every probe's USDT semaphore.
#include "usdt.h"

extern "C" {
// In .probes, where sdt.h puts semaphores: a writable section in the file, so that the kernel's
// uprobe reference counter can find it by file offset.
__attribute__((section(".probes"), used, aligned(4))) volatile uint32_t biofs_trace_gate = 0;
}

#if BIOFS_HAS_USDT
// Each probe's semaphore (provider_name_semaphore, named by sdt.h's note) is the gate's low
// half: on little-endian x86 the low half is at the word's address.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the semaphore is the gate's low half");
#define BIOFS_SEMAPHORE(provider, name) \
  extern "C" volatile unsigned short provider##_##name##_semaphore __attribute__((alias("biofs_trace_gate")));
BIOFS_SEMAPHORE(block, block_bio_queue)
BIOFS_SEMAPHORE(block, block_split)
BIOFS_SEMAPHORE(block, block_bio_backmerge)
BIOFS_SEMAPHORE(block, block_bio_frontmerge)
BIOFS_SEMAPHORE(block, block_getrq)
BIOFS_SEMAPHORE(block, block_sleeprq)
BIOFS_SEMAPHORE(block, block_plug)
BIOFS_SEMAPHORE(block, block_unplug)
BIOFS_SEMAPHORE(block, block_rq_issue)
BIOFS_SEMAPHORE(block, block_rq_complete)
BIOFS_SEMAPHORE(nvme, nvme_setup_cmd)
BIOFS_SEMAPHORE(nvme, nvme_complete_rq)
BIOFS_SEMAPHORE(fuse, fuse_request_receive)
BIOFS_SEMAPHORE(fuse, fuse_request_reply)
#endif

namespace biofs {

void trace_gate_blktrace(int delta) {
  using HalfWord = uint16_t __attribute__((may_alias));
  __atomic_fetch_add(reinterpret_cast<volatile HalfWord*>(&biofs_trace_gate) + 1, HalfWord(delta), __ATOMIC_RELAXED);
}

}  // namespace biofs
