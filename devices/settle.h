// The settling transport (DeviceOptions::settle), for counting instructions per I/O
// (tools/biofs-instructions, biofs-bench fsio):
//
// The emulated namespace's completions come from the kernel (io_uring), on its time: whether a
// command has completed when the driver reaps right after ringing the doorbell, or needs a
// blocking poll later, and how many completions one reap finds, depend on the kernel's worker
// threads and the machine's load. Counted, that makes emu's instructions per I/O differ from run
// to run by several percent at queue depth 32 (measured: 0.6% to 4.5% between two runs). So, by
// default, each doorbell waits here until the command has completed, with callgrind's
// collection off: the driver's reap after the doorbell then always finds it, as if the device
// had completed it inline, and every run executes the same instructions. What is left out of
// the count is the wait itself (the kernel's time, a syscall's wrapper); the driver's own
// reaping is counted. A decorator over the real transport and queues, as the fault injector's.
// Settling is on only while the measuring thread is the one reaper (warm-up and measured I/Os);
// the setup's helper thread would reap the completion a settle waits for.
#pragma once

#include <cstdint>
#include <memory>

#include "nvme/nvme_transport.h"

namespace biofs {

// Wraps `inner`: each doorbell of its queues waits for a completion while settling is on.
std::unique_ptr<NvmeTransport> make_settle_transport(std::unique_ptr<NvmeTransport> inner);
// Settling on or off, for every settling transport of the process (on only while the measuring
// thread is the one reaper).
void set_settling(bool on);
// Doorbells rung through settling queues while settling was on (a watchdog's sign of life).
uint64_t settled_doorbells();

}  // namespace biofs
