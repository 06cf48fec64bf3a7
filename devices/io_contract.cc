#include "io_contract.h"

#include <algorithm>
#include <cstdio>

#include "blockcore/toggles.h"
#include "nvme/fault_inject.h"
#include "nvme/uring_passthru.h"
#include "open_device.h"

namespace biofs {

namespace {

std::string size_text(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) snprintf(buf, sizeof(buf), "%llu MiB", (unsigned long long)(bytes >> 20));
  else if (bytes >= 1024 && bytes % 1024 == 0) snprintf(buf, sizeof(buf), "%llu KiB", (unsigned long long)(bytes >> 10));
  else snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  return buf;
}

std::string kind_line(const Device& dev) {
  if (const NvmeDriver* nvme = dev.nvme()) return nvme->describe();
  if (dev.ram()) return dev.spec() + ": RAM disk (brd), formatted at mount, gone at unmount";
  if (dev.stripe() && !dev.members().empty())
    return dev.spec() + ": striped target over " + std::to_string(dev.members().size()) +
           " devices (bio-based: each piece takes its member's limits)";
  if (dev.stripe()) return dev.spec() + ": striped target over null devices (bio-based)";
  return dev.spec() + ": null_blk (no data kept)";
}

}  // namespace

IoContract io_contract(const Device& dev, const DeviceOptions& asked) {
  IoContract c;
  c.device = kind_line(dev);
  const std::vector<RequestQueue*> queues = dev.queues();
  const RequestQueue* q = dev.queue() ? dev.queue() : queues.empty() ? nullptr : queues.front();
  if (q) {
    c.limits = q->limits();
    c.lba_size = c.limits.logical_block_size;
    c.poll_queues = q->nr_poll_queues();
    c.hw_queues = q->nr_hw_queues() - c.poll_queues;
    c.queue_depth = q->queue_depth();
    for (const ToggleInfo& t : toggle_table()) c.toggles.emplace_back(t.name, t.get(q->toggles()));
  }
  if (const NvmeDriver* nvme = dev.nvme()) {
    if (nvme->id_ctrl().mdts) c.mdts_bytes = uint64_t(NVME_CTRL_PAGE_SIZE) << nvme->id_ctrl().mdts;
    const NvmeTransport* t = nvme->transport();
    if (const auto* faults = dynamic_cast<const FaultTransport*>(t)) t = faults->inner();
    const auto* passthru = dynamic_cast<const UringPassthru*>(t);
    if (passthru && passthru->config().iopoll && c.poll_queues == 0)
      c.unavailable.push_back("iopoll: no poll queues (poll_queues=0), so no ring polls: every command completes by "
                              "interrupt");
  }
  for (const auto& member : dev.members()) c.members.push_back(io_contract(*member, asked));
  if (!c.members.empty()) {  // the stripe's own block: the largest of its members'
    c.lba_size = 0;
    for (const IoContract& m : c.members) c.lba_size = std::max(c.lba_size, m.lba_size);
  }
  if (asked.poll_queues > c.poll_queues)
    c.unavailable.push_back("poll_queues=" + std::to_string(asked.poll_queues) + ": this device has " +
                            std::to_string(c.poll_queues) +
                            " (only NVMe devices have poll queues; reads and writes complete on the device's own path)");
  if (asked.queues > c.hw_queues && q)
    c.unavailable.push_back("queues=" + std::to_string(asked.queues) + ": this device has " + std::to_string(c.hw_queues));
  return c;
}

std::vector<std::string> io_contract_lines(const IoContract& c) {
  std::vector<std::string> out;
  out.push_back("device " + c.device);
  const QueueLimits& l = c.limits;
  std::string lim = "lba " + size_text(c.lba_size) + ", mdts " + (c.mdts_bytes ? size_text(c.mdts_bytes) : "none") +
                    "; limits: max " + size_text(uint64_t(l.max_sectors) << 9) + " per request (" +
                    std::to_string(l.max_sectors) + " sectors, hw " + std::to_string(l.max_hw_sectors) + "), " +
                    std::to_string(l.max_segments) + " segments of " +
                    (l.max_segment_size == UINT32_MAX ? std::string("any size") : "at most " + size_text(l.max_segment_size));
  char mask[64];
  snprintf(mask, sizeof(mask), ", virt boundary %#llx, dma alignment %u, chunk %u sectors",
           (unsigned long long)l.virt_boundary_mask, l.dma_alignment + 1, l.chunk_sectors);
  lim += mask;
  lim += l.write_cache ? ", volatile write cache (flushes and FUA reach it)" : ", no write cache (flushes and FUA dropped)";
  out.push_back(lim);
  std::string queues = "queues " + std::to_string(c.hw_queues) + " x " + std::to_string(c.queue_depth) + " tags, " +
                       std::to_string(c.poll_queues) + " poll; toggles";
  for (const auto& [name, value] : c.toggles) queues += " " + name + "=" + value;
  out.push_back(queues);
  for (const std::string& u : c.unavailable) out.push_back("not available: " + u);
  for (size_t i = 0; i < c.members.size(); i++) {
    const std::vector<std::string> member = io_contract_lines(c.members[i]);
    out.push_back("member " + std::to_string(i + 1) + ": " + member[0]);
    out.push_back("member " + std::to_string(i + 1) + ": " + member[1]);
  }
  return out;
}

}  // namespace biofs
