// One string names a device everywhere (DESIGN.md, "Devices"); this turns it into a running
// block device:
//   emu:PATH[,lba=512|4096][,mdts=N][,vwc][,buffered][,size=SIZE]
//       [,powercut=N][,tear][,keep=F]
//                       the emulated NVMe namespace over a file or block device (emu_ns.h);
//                       size= creates a missing file (K/M/G/T suffixes); powercut= cuts the
//                       power at the Nth state-changing command (emu_powercut.h)
//   nvme:/dev/ngXnY[,regfiles][,fixedbufs][,iopoll][,sqpoll]
//                       io_uring passthrough to a real namespace (uring_passthru.h)
//   either, plus fault injection (fault_inject.h): [,fail_read=F][,fail_write=F][,fail_flush=F]
//       [,delay=F][,delay_us=N][,timeout=F][,timeout_ms=N][,fault_after=N], and [,seed=N] for
//       every seeded choice. The environment variable BIOFS_FAULT, if set, is appended to the
//       options of every emu: and nvme: device string (e.g. BIOFS_FAULT=fail_read=0.01,seed=7).
//   null | null:SIZE    blockcore's null_blk (no data kept)
//   PATH                a plain path is emu:PATH
// Queue settings (hardware queues, depth, toggles, completion thread) come from
// DeviceOptions, the same for every kind.
#pragma once

#include <memory>
#include <string>

#include "blockcore/blk_mq.h"
#include "blockcore/null_blk.h"
#include "emu_ns.h"
#include "fault_inject.h"
#include "nvme_driver.h"
#include "uring_passthru.h"

namespace biofs {

struct DeviceOptions {
  unsigned queues = 1;            // hardware queues
  unsigned qd = 128;              // tags per hardware queue
  bool completion_thread = true;  // false (`poll`): the submitter reaps (NvmeDriver::poll_all)
  bool completion_affinity = true;  // the completion thread follows the submitting CPU
  QueueToggles toggles;
};

struct DeviceSpec {
  enum class Kind { null, emu, nvme } kind = Kind::emu;
  EmuConfig emu;
  UringPassthruConfig nvme;
  NullBlkConfig null_blk;
  bool faults = false;  // a fault option was given: the transport is wrapped (fault_inject.h)
  FaultConfig fault;
};

// Parses a device string. False with one line in *err naming the part that is wrong.
bool parse_device_spec(const std::string& spec, DeviceSpec* out, std::string* err);

// An opened device: the driver that owns the queue, and the BlockDevice bios are aimed at.
class Device {
 public:
  BlockDevice* bdev() const { return bdev_; }
  RequestQueue* queue() const { return bdev_->queue; }
  NvmeDriver* nvme() const { return nvme_.get(); }      // emu: and nvme: devices
  NullBlk* null_blk() const { return null_.get(); }     // null devices
  const std::string& spec() const { return spec_; }
  // The fault injector when the string asked for one, the emulated namespace for emu:.
  FaultInjector* faults() const { return faults_; }
  EmuNamespace* emu() const { return emu_; }
  // Reaps completions for a submitter that polls (DeviceOptions::completion_thread = false);
  // null devices complete inline and return 0.
  int poll(bool wait = false) { return nvme_ ? nvme_->poll_all(wait) : 0; }

 private:
  friend std::unique_ptr<Device> open_device(const std::string&, const DeviceOptions&);
  std::string spec_;
  std::unique_ptr<NullBlk> null_;
  std::unique_ptr<NvmeDriver> nvme_;
  BlockDevice* bdev_ = nullptr;
  FaultInjector* faults_ = nullptr;
  EmuNamespace* emu_ = nullptr;
};

// Opens the device a string names. Throws std::invalid_argument for a bad string and
// std::runtime_error when the device cannot be opened; either way one line.
std::unique_ptr<Device> open_device(const std::string& spec, const DeviceOptions& opts);

}  // namespace biofs
