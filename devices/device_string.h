// One string names a device everywhere (DESIGN.md, "Devices"); this parses it:
//   emu:PATH[,lba=512|4096][,mdts=N][,vwc][,buffered][,size=SIZE]
//       [,powercut=N][,tear][,keep=F]
//                       the emulated NVMe namespace over a file or block device (nvme/emu_ns.h);
//                       size= creates a missing file (K/M/G/T suffixes); powercut= cuts the
//                       power at the Nth state-changing command (nvme/emu_powercut.h)
//   nvme:/dev/ngXnY[,regfiles][,fixedbufs][,iopoll][,sqpoll]
//                       io_uring passthrough to a real namespace (nvme/uring_passthru.h)
//   either, plus fault injection (nvme/fault_inject.h): [,fail_read=F][,fail_write=F]
//       [,fail_flush=F][,delay=F][,delay_us=N][,timeout=F][,timeout_ms=N][,fault_after=N], and
//       [,seed=N] for every seeded choice. The environment variable BIOFS_FAULT, if set, is
//       appended to the options of every emu: and nvme: device string
//       (e.g. BIOFS_FAULT=fail_read=0.01,seed=7).
//   null | null:SIZE    blockcore's null_blk (no data kept)
//   stripe:N            blockcore's striped target over N null devices (1..16)
//   stripe:DEV+DEV[+…]  the striped target over the devices named (2..16; each an emu:, nvme:,
//                       null: or ram: string with its own options; no stripe inside a stripe)
//   ram:SIZE            blockcore's RAM disk (brd): keeps data only while the program runs;
//                       the daemon formats it when it mounts (a filesystem in memory, as tmpfs)
//   PATH                a plain path is emu:PATH
#pragma once

#include <string>
#include <vector>

#include "blockcore/null_blk.h"
#include "lib/status.h"
#include "nvme/emu_ns.h"
#include "nvme/fault_inject.h"
#include "nvme/nvme_driver.h"
#include "nvme/uring_passthru.h"

namespace biofs {

struct DeviceSpec {
  enum class Kind { null, stripe, emu, nvme, ram } kind = Kind::emu;
  uint64_t ram_bytes = 0;  // ram:SIZE
  EmuConfig emu;
  UringPassthruConfig nvme;
  NullBlkConfig null_blk;
  unsigned stripe_children = 0;  // stripe:N
  std::vector<std::string> stripe_members;  // stripe:DEV+DEV…: the members' device strings
  bool faults = false;  // a fault option was given: the transport is wrapped (fault_inject.h)
  FaultConfig fault;
  unsigned max_retries = NVME_DEFAULT_MAX_RETRIES;  // max_retries=N (nvme_core.max_retries)
};

// Parses a device string into *out. Ok, or invalid_argument with one line naming the part
// that is wrong.
Status parse_device_spec(const std::string& spec, DeviceSpec* out);

}  // namespace biofs
