#include "fuseblk.h"

#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "devices/device_string.h"

namespace biofs {

namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// The file a loop device reads, from sysfs; "" when `rdev` is not a bound loop device.
std::string loop_backing_file(dev_t rdev) {
  std::ifstream f("/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev)) +
                  "/loop/backing_file");
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

Status check_blkdev(const std::string& device, const std::string& blkdev) {
  const std::string what = "blkdev=" + blkdev + ": ";
  struct stat st;
  if (stat(blkdev.c_str(), &st) != 0) return Status::not_found(what + strerror(errno));
  if (!S_ISBLK(st.st_mode)) return Status::invalid_argument(what + "not a block device");
  DeviceSpec spec;
  if (Status s = parse_device_spec(device, &spec); !s.ok()) return s;
  if (spec.kind == DeviceSpec::Kind::emu) {
    const std::string backing = loop_backing_file(st.st_rdev), image = real(spec.emu.path);
    if (backing.empty()) return Status::invalid_argument(what + "not a loop device (losetup IMAGE makes one of " + image + ")");
    if (real(backing) != image)
      return Status::invalid_argument(what + "a loop device of " + backing + ", not of " + image);
    return Status();
  }
  if (spec.kind == DeviceSpec::Kind::nvme) {
    // The namespace's block device has the generic char device's name with nvme for ng.
    const std::string ng = spec.nvme.path.substr(spec.nvme.path.rfind('/') + 1);
    const std::string nvme = ng.rfind("ng", 0) == 0 ? "/dev/nvme" + ng.substr(2) : "";
    struct stat want;
    if (nvme.empty() || stat(nvme.c_str(), &want) != 0 || !S_ISBLK(want.st_mode))
      return Status::invalid_argument(what + "no block device beside " + spec.nvme.path + " to compare with");
    if (want.st_rdev != st.st_rdev) return Status::invalid_argument(what + "not " + nvme + ", the block device of " + spec.nvme.path);
    return Status();
  }
  return Status::invalid_argument(what + "a fuseblk mount needs an emu: or nvme: device");
}

}  // namespace biofs
