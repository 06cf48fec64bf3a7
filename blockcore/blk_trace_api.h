// The blktrace record as the kernel writes it: include/uapi/linux/blktrace_api.h (v6.18), the
// "v1" layout, version 0x07, that blkparse and btt read. Nothing here but the format.
#pragma once

#include <cstdint>

namespace biofs {

// Trace categories (the upper 16 bits of `action`).
enum blktrace_cat : uint32_t {
  BLK_TC_READ = 1 << 0,
  BLK_TC_WRITE = 1 << 1,
  BLK_TC_FLUSH = 1 << 2,
  BLK_TC_SYNC = 1 << 3,
  BLK_TC_QUEUE = 1 << 4,
  BLK_TC_REQUEUE = 1 << 5,
  BLK_TC_ISSUE = 1 << 6,
  BLK_TC_COMPLETE = 1 << 7,
  BLK_TC_FS = 1 << 8,
  BLK_TC_PC = 1 << 9,
  BLK_TC_NOTIFY = 1 << 10,
  BLK_TC_AHEAD = 1 << 11,
  BLK_TC_META = 1 << 12,
  BLK_TC_DISCARD = 1 << 13,
  BLK_TC_DRV_DATA = 1 << 14,
  BLK_TC_FUA = 1 << 15,
};
inline constexpr uint32_t BLK_TC_SHIFT = 16;
constexpr uint32_t BLK_TC_ACT(uint32_t act) { return act << BLK_TC_SHIFT; }

// Basic actions (the lower 16 bits).
enum blktrace_act : uint32_t {
  __BLK_TA_QUEUE = 1,
  __BLK_TA_BACKMERGE,
  __BLK_TA_FRONTMERGE,
  __BLK_TA_GETRQ,
  __BLK_TA_SLEEPRQ,
  __BLK_TA_REQUEUE,
  __BLK_TA_ISSUE,
  __BLK_TA_COMPLETE,
  __BLK_TA_PLUG,
  __BLK_TA_UNPLUG_IO,
  __BLK_TA_UNPLUG_TIMER,
  __BLK_TA_INSERT,
  __BLK_TA_SPLIT,
  __BLK_TA_BOUNCE,
  __BLK_TA_REMAP,
  __BLK_TA_ABORT,
  __BLK_TA_DRV_DATA,
};
// Notify actions.
enum blktrace_notify : uint32_t {
  __BLK_TN_PROCESS = 0,
  __BLK_TN_TIMESTAMP,
  __BLK_TN_MESSAGE,
};

inline constexpr uint32_t BLK_TA_QUEUE = __BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_BACKMERGE = __BLK_TA_BACKMERGE | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_FRONTMERGE = __BLK_TA_FRONTMERGE | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_GETRQ = __BLK_TA_GETRQ | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_SLEEPRQ = __BLK_TA_SLEEPRQ | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_REQUEUE = __BLK_TA_REQUEUE | BLK_TC_ACT(BLK_TC_REQUEUE);
inline constexpr uint32_t BLK_TA_ISSUE = __BLK_TA_ISSUE | BLK_TC_ACT(BLK_TC_ISSUE);
inline constexpr uint32_t BLK_TA_COMPLETE = __BLK_TA_COMPLETE | BLK_TC_ACT(BLK_TC_COMPLETE);
inline constexpr uint32_t BLK_TA_PLUG = __BLK_TA_PLUG | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_UNPLUG_IO = __BLK_TA_UNPLUG_IO | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_UNPLUG_TIMER = __BLK_TA_UNPLUG_TIMER | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_INSERT = __BLK_TA_INSERT | BLK_TC_ACT(BLK_TC_QUEUE);
inline constexpr uint32_t BLK_TA_SPLIT = __BLK_TA_SPLIT;
inline constexpr uint32_t BLK_TN_PROCESS = __BLK_TN_PROCESS | BLK_TC_ACT(BLK_TC_NOTIFY);

inline constexpr uint32_t BLK_IO_TRACE_MAGIC = 0x65617400;
inline constexpr uint32_t BLK_IO_TRACE_VERSION = 0x07;

// struct blk_io_trace: 48 bytes, then pdu_len bytes of payload.
struct blk_io_trace {
  uint32_t magic;     // BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION
  uint32_t sequence;  // event number, per CPU
  uint64_t time;      // nanoseconds
  uint64_t sector;    // disk offset
  uint32_t bytes;     // transfer length
  uint32_t action;    // what happened: category bits << 16 | basic action
  uint32_t pid;       // who did it
  uint32_t device;    // device number, MKDEV(major, minor) with 20 minor bits
  uint32_t cpu;       // on what CPU it happened
  uint16_t error;     // completion error (a negative errno, truncated as the kernel's is)
  uint16_t pdu_len;   // bytes after this record
};
static_assert(sizeof(blk_io_trace) == 48, "the v1 record is 48 bytes");

constexpr uint32_t blk_trace_mkdev(uint32_t major, uint32_t minor) { return major << 20 | minor; }

}  // namespace biofs
