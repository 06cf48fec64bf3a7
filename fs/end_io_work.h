// Work that must run after a write's data is on disk but cannot run where the completion
// arrives: counterpart of ext4's reserved-conversion work (fs/ext4/page-io.c:
// ext4_add_complete_io() queues an io_end, ext4_end_io_rsv_work() converts the unwritten
// extents of everything queued, in one pass). The completion thread only queues; one worker
// thread takes the whole queue at a time and hands it to `run`, so a burst of writes into
// fallocated space costs one hold of the filesystem lock, not one each, and the completion
// thread never waits for that lock (whose holders may be waiting for completions).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

namespace biofs {

class EndIoWork {
 public:
  struct Item {
    virtual ~Item() = default;
  };
  // Called on the worker thread with everything queued since its last call; owns the items.
  using Run = std::function<void(std::vector<Item*>& items)>;

  explicit EndIoWork(Run run);
  ~EndIoWork();  // drains, then stops the thread
  EndIoWork(const EndIoWork&) = delete;
  EndIoWork& operator=(const EndIoWork&) = delete;

  // An item's life: begin() before its I/O is submitted, queue() from its completion, and
  // end() once `run` has finished with it. drain() waits until every begun item has ended.
  void begin();
  void queue(Item* item);
  void end();
  void drain();

 private:
  void worker(std::stop_token stop);

  Run run_;
  std::mutex lock_;
  std::condition_variable_any wake_;  // the worker: items queued, or stop
  std::condition_variable idle_;
  std::vector<Item*> queued_;
  uint64_t outstanding_ = 0;  // begun, not yet ended
  std::jthread thread_;  // last: started once the members above exist
};

}  // namespace biofs
