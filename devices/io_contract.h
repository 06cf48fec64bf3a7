// The mount-time I/O contract: what the block stack under a mount will do with an I/O, read off
// the opened device before the first one: what the device is, its LBA size and the controller's
// limit per command (MDTS), the queue limits the block layer derived from them (as the kernel's
// nvme_set_ctrl_limits / blk_validate_limits do, v6.18), the hardware queues, their depth and
// the poll queues, the toggles, and what was asked for but is not to be had here. The daemon
// prints it with `-o verbose` and keeps it in its stats (`contract`), which biofs-stat shows.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "blockcore/queue_limits.h"

namespace biofs {

class Device;
struct DeviceOptions;

struct IoContract {
  std::string device;          // one line: the kind, the namespace, its size
  uint32_t lba_size = 0;       // the logical block size, bytes
  uint64_t mdts_bytes = 0;     // the controller's own limit per command; 0: none (or not NVMe)
  QueueLimits limits;          // as the block layer validated them
  unsigned hw_queues = 0;      // default hardware queues
  unsigned poll_queues = 0;    // polled hardware queues beside them
  unsigned queue_depth = 0;    // tags per hardware queue
  std::vector<std::pair<std::string, std::string>> toggles;  // name, value
  std::vector<std::string> unavailable;  // what was asked for and is not there, one line each
  std::vector<IoContract> members;       // a stripe:DEV+DEV…: each member's own contract
};

// The contract of `dev`, opened with `asked`.
IoContract io_contract(const Device& dev, const DeviceOptions& asked);

// The contract as a few lines for a person (no trailing newlines).
std::vector<std::string> io_contract_lines(const IoContract& c);

}  // namespace biofs
