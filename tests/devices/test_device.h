// Opening devices in a test: a device string, or an emulated namespace alone, that must open;
// when it does not, the test stops there with the one line that says why.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <utility>

#include "devices/open_device.h"
#include "nvme/emu_ns.h"
#include "nvme/nvme_driver.h"

namespace biofs::test {

inline std::unique_ptr<Device> open_test_device(const std::string& spec, const DeviceOptions& opts = {}) {
  std::unique_ptr<Device> dev;
  const Status s = open_device(spec, opts, &dev);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return dev;
}

// The NVMe driver over `transport`, set up (NvmeDriver::create).
inline std::unique_ptr<NvmeDriver> make_test_driver(std::unique_ptr<NvmeTransport> transport,
                                                    const NvmeDriverConfig& cfg = {}) {
  std::unique_ptr<NvmeDriver> drv;
  const Status s = NvmeDriver::create(std::move(transport), cfg, &drv);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return drv;
}

inline std::unique_ptr<EmuNamespace> open_test_emu(const EmuConfig& cfg) {
  std::unique_ptr<EmuNamespace> ns;
  const Status s = EmuNamespace::open(cfg, &ns);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return ns;
}

}  // namespace biofs::test
