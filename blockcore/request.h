// Counterpart of struct request and struct rq_list (include/linux/blk-mq.h): a tagged unit of
// work for a hardware queue, carrying its bios; and the singly linked request list that plugs,
// caches and completion batches pass around.
#pragma once

#include <cstdint>

#include "bio.h"

namespace biofs {

class RequestQueue;
struct BlkMqHwCtx;

struct alignas(64) Request {
  RequestQueue* q;
  BlkMqHwCtx* mq_hctx;
  blk_opf_t cmd_flags;
  int tag;                    // index in the hardware queue's tag space; the NVMe command id
  sector_t __sector;
  uint32_t __data_len;        // bytes
  uint16_t nr_phys_segments;
  blk_status_t status;        // carried through a completion batch
  uint8_t rq_flags;           // RQF_* (req_flags_t): RQF_MIXED_MERGE
  uint16_t alloc_cpu;         // sbitmap slot of the allocating thread: the tag's hint on free
  Bio* bio;                   // first bio; merged ones follow through bi_next up to biotail
  Bio* biotail;
  Request* rq_next;           // list link (plug, cache, completion batch)
  uint64_t start_time_ns;     // set when the request is dispatched, for the stage histograms
  uint64_t io_start_time_ns;  // a sampled request's submission to the device (stage_clock.h); 0 if not sampled
  // The driver's per-request area (tag set cmd_size bytes) follows: blk_mq_rq_to_pdu().
};

// req_flags_t bits (include/linux/blk-mq.h, v6.18): the one of them biofs needs.
inline constexpr uint8_t RQF_MIXED_MERGE = 1u << 0;  // merged bios differ in their failfast flags

inline void* blk_mq_rq_to_pdu(Request* rq) { return rq + 1; }
inline sector_t blk_rq_pos(const Request* rq) { return rq->__sector; }
inline uint32_t blk_rq_bytes(const Request* rq) { return rq->__data_len; }
inline uint32_t blk_rq_sectors(const Request* rq) { return rq->__data_len >> SECTOR_SHIFT; }
inline req_op req_op_of(const Request* rq) { return bio_op_of(rq->cmd_flags); }

struct RqList {  // struct rq_list
  Request* head = nullptr;
  Request* tail = nullptr;

  bool empty() const { return head == nullptr; }
  void add_tail(Request* rq) {
    rq->rq_next = nullptr;
    if (tail) tail->rq_next = rq;
    else head = rq;
    tail = rq;
  }
  void add_head(Request* rq) {
    rq->rq_next = head;
    head = rq;
    if (!tail) tail = rq;
  }
  Request* pop() {
    Request* rq = head;
    if (rq) {
      head = rq->rq_next;
      if (!head) tail = nullptr;
      rq->rq_next = nullptr;
    }
    return rq;
  }
  Request* peek() const { return head; }
};

}  // namespace biofs
