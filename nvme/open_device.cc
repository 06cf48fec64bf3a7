#include "open_device.h"
#include "blockcore/printable.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace biofs {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

bool parse_uint(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');
  }
  *out = v;
  return true;
}

bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': mult = 1ull << 10; break;
    case 'M': case 'm': mult = 1ull << 20; break;
    case 'G': case 'g': mult = 1ull << 30; break;
    case 'T': case 't': mult = 1ull << 40; break;
    default: break;
  }
  if (mult != 1) digits.pop_back();
  uint64_t n;
  if (!parse_uint(digits, &n) || n == 0 || n > (UINT64_MAX >> 1) / mult) return false;
  *out = n * mult;
  return true;
}

}  // namespace

bool parse_device_spec(const std::string& spec, DeviceSpec* out, std::string* err) {
  *out = DeviceSpec{};
  const char* env = getenv("BIOFS_FAULT");
  const std::string where = "device '" + spec + "'" + (env && *env ? std::string(" (with BIOFS_FAULT)") : "");
  if (spec.empty()) {
    *err = "empty device string (expected emu:PATH, nvme:/dev/ngXnY, null:SIZE or a path)";
    return false;
  }
  if (printable(spec) != spec) {
    *err = "device '" + printable(spec) + "' holds a control character";
    return false;
  }
  if (spec == "null" || spec.rfind("null:", 0) == 0) {
    out->kind = DeviceSpec::Kind::null;
    return parse_null_device(spec, &out->null_blk, err);
  }
  std::string full = spec;
  if (env && *env) full += std::string(",") + env;
  const std::vector<std::string> parts = split(full, ',');
  std::string path = parts[0];
  if (path.rfind("emu:", 0) == 0) {
    path = path.substr(4);
  } else if (path.rfind("nvme:", 0) == 0) {
    out->kind = DeviceSpec::Kind::nvme;
    path = path.substr(5);
  } else if (const size_t colon = path.find(':'); colon != std::string::npos && path.find('/') > colon) {
    *err = where + ": unknown kind '" + path.substr(0, colon) + ":' (expected emu:, nvme: or null:)";
    return false;
  }
  if (path.empty()) {
    *err = where + ": no path";
    return false;
  }
  const bool emu = out->kind == DeviceSpec::Kind::emu;
  out->emu.path = out->nvme.path = path;
  for (size_t i = 1; i < parts.size(); i++) {
    const std::string& opt = parts[i];
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : opt.substr(eq + 1);
    const bool has_val = eq != std::string::npos;
    auto bad = [&](const std::string& why) {
      *err = where + ": " + opt + ": " + why;
      return false;
    };
    auto flag = [&](bool* f) {
      if (has_val) return bad("takes no value");
      *f = true;
      return true;
    };
    uint64_t n = 0;
    std::string ferr;
    if (parse_fault_option(key, val, &out->fault, &ferr)) {
      if (!ferr.empty()) {
        *err = where + ": " + ferr;
        return false;
      }
      out->faults = true;
    } else if (key == "seed") {
      if (!parse_uint(val, &n)) return bad("expected seed=N");
      out->fault.seed = out->emu.powercut.seed = n;
    } else if (emu && key == "powercut") {
      if (!parse_uint(val, &n)) return bad("expected powercut=N (cut at the Nth write or flush; 0: count only)");
      out->emu.powercut.enabled = true;
      out->emu.powercut.cut_after = n;
    } else if (emu && key == "tear") {
      if (!flag(&out->emu.powercut.tear)) return false;
    } else if (emu && key == "keep") {
      char* end = nullptr;
      const double f = strtod(val.c_str(), &end);
      if (val.empty() || *end || !(f >= 0 && f <= 1)) return bad("expected keep=F, a fraction 0..1");
      out->emu.powercut.keep = f;
    } else if (emu && key == "lba") {
      if (!parse_uint(val, &n) || (n != 512 && n != 4096)) return bad("expected lba=512 or lba=4096");
      out->emu.lba_size = unsigned(n);
    } else if (emu && key == "mdts") {
      if (!parse_uint(val, &n) || n > 10) return bad("expected mdts=0..10 (4 KiB << N per command, 0: no limit)");
      out->emu.mdts = unsigned(n);
    } else if (emu && key == "size") {
      if (!parse_size(val, &n)) return bad("expected size=N with an optional K/M/G/T suffix");
      out->emu.create_size = n;
    } else if (emu && key == "vwc") {
      if (!flag(&out->emu.vwc)) return false;
    } else if (emu && key == "buffered") {
      if (!flag(&out->emu.buffered)) return false;
    } else if (!emu && key == "regfiles") {
      if (!flag(&out->nvme.regfiles)) return false;
    } else if (!emu && key == "fixedbufs") {
      if (!flag(&out->nvme.fixedbufs)) return false;
    } else if (!emu && key == "iopoll") {
      if (!flag(&out->nvme.iopoll)) return false;
    } else if (!emu && key == "sqpoll") {
      if (!flag(&out->nvme.sqpoll)) return false;
    } else {
      return bad(emu ? "unknown option (emu: takes lba=, mdts=, size=, vwc, buffered, powercut=, tear, keep=, "
                       "seed= and the fault options fail_read=, fail_write=, fail_flush=, delay=, delay_us=, "
                       "timeout=, timeout_ms=, fault_after=)"
                     : "unknown option (nvme: takes regfiles, fixedbufs, iopoll, sqpoll, seed= and the fault "
                       "options fail_read=, fail_write=, fail_flush=, delay=, delay_us=, timeout=, timeout_ms=, "
                       "fault_after=)");
    }
  }
  if ((out->emu.powercut.tear || out->emu.powercut.keep > 0) && !out->emu.powercut.enabled) {
    *err = where + ": tear and keep= need powercut=N";
    return false;
  }
  return true;
}

std::unique_ptr<Device> open_device(const std::string& spec, const DeviceOptions& opts) {
  DeviceSpec ds;
  std::string err;
  if (!parse_device_spec(spec, &ds, &err)) throw std::invalid_argument(err);
  auto dev = std::make_unique<Device>();
  dev->spec_ = spec;
  if (ds.kind == DeviceSpec::Kind::null) {
    ds.null_blk.nr_queues = opts.queues;
    ds.null_blk.queue_depth = opts.qd;
    ds.null_blk.toggles = opts.toggles;
    dev->null_ = std::make_unique<NullBlk>(ds.null_blk);
    dev->bdev_ = dev->null_->bdev();
    return dev;
  }
  std::unique_ptr<NvmeTransport> transport;
  if (ds.kind == DeviceSpec::Kind::emu) {
    auto emu = std::make_unique<EmuNamespace>(ds.emu);
    dev->emu_ = emu.get();
    transport = std::move(emu);
  } else {
    transport = std::make_unique<UringPassthru>(ds.nvme);
  }
  if (ds.faults) {
    auto wrap = std::make_unique<FaultTransport>(std::move(transport), ds.fault);
    dev->faults_ = &wrap->injector();
    transport = std::move(wrap);
  }
  NvmeDriverConfig cfg;
  cfg.nr_queues = opts.queues;
  cfg.queue_depth = opts.qd;
  cfg.completion_thread = opts.completion_thread;
  cfg.completion_affinity = opts.completion_affinity;
  cfg.toggles = opts.toggles;
  dev->nvme_ = std::make_unique<NvmeDriver>(std::move(transport), cfg);
  dev->bdev_ = dev->nvme_->bdev();
  return dev;
}

}  // namespace biofs
