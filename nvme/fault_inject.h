// Fault injection below the driver: a transport that wraps another (emulated or passthrough)
// and, per command, seeded, fails it with an NVMe error status, delays its completion, or
// "times it out". No kernel twin as such; the nearest are the fail_io_timeout and
// fail_make_request fault attributes (block/blk-timeout.c, block/blk-core.c) and the NVMe
// host's timeout path (drivers/nvme/host/pci.c nvme_timeout), which completes an expired
// command with a host-aborted status instead of letting it hang.
//
// Kinds, each chosen per command with its own probability:
//   fail     the command never reaches the device; it completes with an error status
//            (reads: Unrecovered Read Error, writes: Write Fault, flushes: Internal Error)
//   delay    the command runs; its completion is held back by delay_us
//   timeout  the command runs (a write may well land); its completion is held until
//            timeout_ms have passed and then reported as Host Aborted Command
// The caller sees an error status for a failed or timed-out command and nothing hangs: every
// held completion is released by the reaper once its time has come (within REAP_WAIT_MS).
// Without the wrapper (no fault option given) the driver talks to its transport directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "nvme_transport.h"

namespace biofs {

struct FaultConfig {
  double fail_read = 0, fail_write = 0, fail_flush = 0;  // fractions 0..1 of each kind of command
  double delay = 0;          // fraction of commands whose completion is delayed
  uint32_t delay_us = 1000;  // by this much
  double timeout = 0;        // fraction of commands that time out
  uint32_t timeout_ms = 50;  // after this long
  uint64_t seed = 1;
  uint64_t after = 0;        // the first `after` commands pass untouched (lets a mount finish)
  // The kernel's fault_inject dont_retry (drivers/nvme/host/fault_inject.c, on by default):
  // injected statuses carry DNR, so the driver does not retry them (nvme_decide_disposition).
  // false (fault_retry): they do not, and the driver retries them up to its max_retries.
  bool dont_retry = true;
  bool any() const { return fail_read > 0 || fail_write > 0 || fail_flush > 0 || delay > 0 || timeout > 0; }
};

// The device string's fault options (devices/device_string.h) fill this in.
struct FaultCounters {
  uint64_t commands = 0, failed = 0, delayed = 0, timed_out = 0;
};

// The decisions, shared by every queue of one device. Reconfigurable while I/O runs (tests
// turn faults on after mounting and off before checking).
class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& cfg) { set(cfg); }
  void set(const FaultConfig& cfg);
  FaultConfig config() const;
  FaultCounters counters() const;

  enum Kind : uint8_t { NONE, FAIL, DELAY, TIMEOUT };
  struct Decision {
    Kind kind = NONE;
    uint16_t status = 0;  // NVMe status for FAIL / TIMEOUT
    uint64_t hold_ns = 0;  // DELAY / TIMEOUT
  };
  Decision decide(uint8_t opcode);

 private:
  static uint32_t threshold(double p);  // probability -> 32-bit threshold

  std::atomic<uint32_t> fail_read_{0}, fail_write_{0}, fail_flush_{0}, delay_{0}, timeout_{0};
  std::atomic<uint32_t> delay_us_{0}, timeout_ms_{0};
  std::atomic<bool> dont_retry_{true};
  std::atomic<uint64_t> seed_{1}, after_{0};
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> failed_{0}, delayed_{0}, timed_out_{0};
};

// The wrapping transport. Queues it creates wrap the inner transport's queues.
class FaultTransport final : public NvmeTransport {
 public:
  FaultTransport(std::unique_ptr<NvmeTransport> inner, const FaultConfig& cfg);
  std::string name() const override { return inner_->name(); }
  uint32_t nsid() const override { return inner_->nsid(); }
  uint32_t max_user_pages() const override { return inner_->max_user_pages(); }
  std::string kernel_transport() const override { return inner_->kernel_transport(); }
  int admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) override {
    return inner_->admin_cmd(cmd, data, len);
  }
  Status create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) override;

  FaultInjector& injector() { return injector_; }
  NvmeTransport* inner() { return inner_.get(); }
  const NvmeTransport* inner() const { return inner_.get(); }

 private:
  std::unique_ptr<NvmeTransport> inner_;
  FaultInjector injector_;
};

}  // namespace biofs
