// Opens the device a string names (device_string.h) and keeps what it is made of: the NVMe
// driver over an emulated or passthrough namespace (with the fault injector when asked), a
// null_blk, a striped target over null_blks or over other devices, or a RAM disk. The only
// place that builds devices; the daemon, mkfs, fsck, the bench and the tests all come here. Queue settings (hardware queues, depth,
// toggles, completion thread) come from DeviceOptions, the same for every kind.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "blockcore/blk_cover.h"
#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"
#include "blockcore/null_blk.h"
#include "device_stats.h"
#include "device_string.h"
#include "lib/status.h"

namespace biofs {

// What a device is made of: known to devices/ and the white-box tests, which include their
// headers; the face below names them only.
class BrdDevice;
class EmuNamespace;
class FaultInjector;
class NvmeDriver;
class StripeTarget;

struct DeviceOptions {
  unsigned queues = 1;            // hardware queues
  unsigned qd = 128;              // tags per hardware queue
  bool completion_thread = true;  // false (`poll`): the submitter reaps (NvmeDriver::poll_all)
  bool completion_affinity = true;  // the completion thread follows the submitting CPU
  unsigned poll_queues = 0;       // NVMe poll queues beside the hardware queues (blockcore/blk_poll.h)
  unsigned cover_look_ms = COVER_LOOK_MS;  // NvmeDriverConfig::cover_look_ms
  Toggles toggles;
  // null: and stripe: devices: how requests complete (null_blk's irqmode and completion_nsec)
  // and the stripe's chunk.
  NullBlkConfig::IrqMode null_irqmode = NullBlkConfig::IrqMode::none;
  uint64_t null_completion_nsec = 10'000;
  uint32_t stripe_chunk_sectors = 256;
  // emu: without faults and without a completion thread: each doorbell waits for its command
  // to complete (settle.h), so an instruction count per I/O is the same run after run.
  bool settle = false;
};

// An opened device. Its face for the daemon, the tools and the bench: the BlockDevice bios are
// aimed at, its queues, poll/inflight for a submitter that reaps, stats, its kind and string.
// What it is made of (nvme(), emu(), faults(), null_blk(), stripe(), ram()) is for devices/
// itself and the white-box tests.
class Device {
 public:
  Device();
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  BlockDevice* bdev() const { return bdev_; }
  DeviceSpec::Kind kind() const { return kind_; }
  // The blk-mq queue bios reach; nullptr for a striped target (a bio-based device: see queues()).
  RequestQueue* queue() const { return bdev_->queue; }
  // Every blk-mq queue under this device: its own, or each stripe child's.
  std::vector<RequestQueue*> queues() const;
  // The bio sets inside the device that a bio_cache toggle reaches besides the filesystem's
  // own: a stripe's clone set (blockcore/stripe.h); none for the others.
  std::vector<BioSet*> bio_sets() const;
  // The members of a stripe:DEV+DEV… (empty for any other device).
  const std::vector<std::unique_ptr<Device>>& members() const { return members_; }
  NvmeDriver* nvme() const { return nvme_.get(); }      // emu: and nvme: devices
  NullBlk* null_blk() const { return nulls_.empty() ? nullptr : nulls_[0].get(); }  // null:, a stripe's first child
  StripeTarget* stripe() const { return stripe_.get(); }
  BrdDevice* ram() const { return brd_.get(); }  // ram: (empty when opened)
  const std::string& spec() const { return spec_; }
  // The fault injector when the string asked for one, the emulated namespace for emu:.
  FaultInjector* faults() const { return faults_; }
  EmuNamespace* emu() const { return emu_; }
  // What the device reports for the stats; false when it has nothing to say (only NVMe
  // devices, emulated or passthrough, do).
  bool stats(DeviceStats* out) const;
  // Requests in flight in the NVMe driver (and a stripe's members); 0 for the others.
  uint64_t inflight() const;
  // Reaps completions for a submitter that polls (DeviceOptions::completion_thread = false);
  // null devices complete inline and return 0.
  int poll(bool wait = false);

 private:
  friend Status open_device(const DeviceSpec&, const std::string&, const DeviceOptions&, std::unique_ptr<Device>*);
  std::string spec_;
  DeviceSpec::Kind kind_ = DeviceSpec::Kind::emu;
  // Destroyed in reverse: the stripe before the devices under it.
  std::vector<std::unique_ptr<Device>> members_;  // stripe:DEV+DEV…
  std::vector<std::unique_ptr<NullBlk>> nulls_;
  std::unique_ptr<StripeTarget> stripe_;
  std::unique_ptr<NvmeDriver> nvme_;
  std::unique_ptr<BrdDevice> brd_;
  BlockDevice* bdev_ = nullptr;
  FaultInjector* faults_ = nullptr;
  EmuNamespace* emu_ = nullptr;
};

// Opens the device a string names into *out. Ok, or one line (and *out null): invalid_argument
// for a bad string or setting, not_found for a missing backing file or device node, io_error
// when the system or the device refuses. Nothing here or below it throws.
Status open_device(const std::string& spec, const DeviceOptions& opts, std::unique_ptr<Device>* out);
// The same, from the string parsed already (`spec`, its text, is what Device::spec() says).
Status open_device(const DeviceSpec& ds, const std::string& spec, const DeviceOptions& opts,
                   std::unique_ptr<Device>* out);

class DeviceLock;

// For a tool: takes the backing file's lock first (device_lock.h: shared or exclusive, waiting
// up to 10 s for a daemon that is shutting down), then opens the device into *out. Ok, or one
// line when either fails (busy: another process holds the file); the lock is held by *lock
// for as long as the caller keeps it.
Status open_device_locked(const std::string& spec, const DeviceOptions& opts, DeviceLock* lock, bool exclusive,
                          const char* tool, std::unique_ptr<Device>* out);

}  // namespace biofs
