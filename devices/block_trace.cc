#include "block_trace.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "blockcore/blk_trace.h"

namespace biofs {

Status resolve_trace_dir(const std::string& dir, std::string* out) {
  out->clear();
  if (dir.empty()) return {};
  char* real = realpath(dir.c_str(), nullptr);
  if (!real) return Status::not_found("trace=" + dir + ": " + strerror(errno));
  *out = real;
  free(real);
  return {};
}

Status start_block_trace(Device& dev, const std::string& dir) {
  const std::vector<RequestQueue*> queues = dev.queues();
  for (unsigned i = 0; i < queues.size(); i++) {
    queues[i]->set_devt(blk_trace_mkdev(259, i));
    if (dir.empty()) continue;
    BlkTraceConfig cfg;
    cfg.dir = dir;
    cfg.name = queues.size() == 1 ? "biofs" : "biofs" + std::to_string(i);
    cfg.device = queues[i]->devt();
    if (Status s = blk_trace_setup(queues[i], cfg); !s.ok()) {
      stop_block_trace(dev);
      return s;
    }
  }
  return {};
}

std::string stop_block_trace(Device& dev) {
  std::string lines;
  for (RequestQueue* q : dev.queues()) {
    BlkTraceStats st;
    if (blk_trace_remove(q, &st) && st.dropped)
      lines += "biofs: trace: " + std::to_string(st.dropped) + " records dropped of " +
               std::to_string(st.records + st.dropped) + " (the writer fell behind)\n";
  }
  return lines;
}

}  // namespace biofs
