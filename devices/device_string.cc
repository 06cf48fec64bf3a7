#include "device_string.h"

#include <cstdlib>

#include "lib/parse_number.h"
#include "lib/printable.h"
#include "lib/suboptions.h"

namespace biofs {

namespace {

using Takes = SubOption::Takes;

SubOption flag(const char* name, bool* f) {
  return {name, Takes::nothing, [f](std::string_view) { *f = true; return Status(); }};
}

// The options both NVMe kinds take: fault injection and its seed, and the driver's retries.
void add_fault_options(DeviceSpec* out, std::vector<SubOption>* t) {
  FaultConfig* c = &out->fault;
  auto fraction = [out](const char* name, double* f) {
    return SubOption{name, Takes::value, [out, f](std::string_view v) {
                       if (!parse_fraction(v, f)) return Status::invalid_argument("expected a fraction 0..1");
                       out->faults = true;
                       return Status();
                     }};
  };
  auto bounded = [out](const char* name, uint32_t* n, uint64_t hi) {
    return SubOption{name, Takes::value, [out, n, hi](std::string_view v) {
                       uint64_t x;
                       if (!parse_uint(v, &x, 1, hi))
                         return Status::invalid_argument("expected 1.." + std::to_string(hi));
                       *n = uint32_t(x);
                       out->faults = true;
                       return Status();
                     }};
  };
  t->push_back(fraction("fail_read", &c->fail_read));
  t->push_back(fraction("fail_write", &c->fail_write));
  t->push_back(fraction("fail_flush", &c->fail_flush));
  t->push_back(fraction("delay", &c->delay));
  t->push_back(fraction("timeout", &c->timeout));
  t->push_back(bounded("delay_us", &c->delay_us, 60'000'000));
  t->push_back(bounded("timeout_ms", &c->timeout_ms, 600'000));  // 10 minutes
  t->push_back({"fault_retry", Takes::nothing, [out](std::string_view) {
                  out->fault.dont_retry = false;  // the kernel injector's dont_retry=0
                  out->faults = true;
                  return Status();
                }});
  t->push_back({"max_retries", Takes::value, [out](std::string_view v) {
                  uint64_t n;
                  if (!parse_uint(v, &n, 0, 255)) return Status::invalid_argument("expected 0..255");
                  out->max_retries = unsigned(n);
                  return Status();
                }});
  t->push_back({"fault_after", Takes::value, [out](std::string_view v) {
                  if (!parse_uint(v, &out->fault.after)) return Status::invalid_argument("expected a command count");
                  out->faults = true;
                  return Status();
                }});
  t->push_back({"seed", Takes::value, [out](std::string_view v) {
                  uint64_t n;
                  if (!parse_uint(v, &n)) return Status::invalid_argument("expected seed=N");
                  out->fault.seed = out->emu.powercut.seed = n;
                  return Status();
                }});
}

std::vector<SubOption> emu_options(DeviceSpec* out) {
  EmuConfig* e = &out->emu;
  std::vector<SubOption> t = {
      {"lba", Takes::value, [e](std::string_view v) {
         uint64_t n;
         if (!parse_uint(v, &n) || (n != 512 && n != 4096))
           return Status::invalid_argument("expected lba=512 or lba=4096");
         e->lba_size = unsigned(n);
         return Status();
       }},
      {"mdts", Takes::value, [e](std::string_view v) {
         uint64_t n;
         if (!parse_uint(v, &n, 0, 10))
           return Status::invalid_argument("expected mdts=0..10 (4 KiB << N per command, 0: no limit)");
         e->mdts = unsigned(n);
         return Status();
       }},
      {"size", Takes::value, [e](std::string_view v) {
         if (!parse_size(v, &e->create_size))
           return Status::invalid_argument("expected size=N with an optional K/M/G/T suffix");
         return Status();
       }},
      {"vwc", Takes::optional, [e](std::string_view v) {  // nvme/emu_ns.h, "Durability"
         e->vwc = true;
         if (v.empty()) return Status();
         if (v == "through") {
           e->write_cache_bytes = 0;
           return Status();
         }
         if (!parse_size(v, &e->write_cache_bytes) || e->write_cache_bytes < (1u << 20) ||
             e->write_cache_bytes > (4ull << 30))
           return Status::invalid_argument("expected vwc, vwc=SIZE (the write cache, 1M..4G) or vwc=through");
         return Status();
       }},
      flag("buffered", &e->buffered),
      {"inline", Takes::value, [e](std::string_view v) {
         if (v == "on") e->inline_io = EmuInline::on;
         else if (v == "off") e->inline_io = EmuInline::off;
         else if (v == "auto") e->inline_io = EmuInline::automatic;
         else return Status::invalid_argument("expected inline=on, off or auto");
         return Status();
       }},
      {"powercut", Takes::value, [e](std::string_view v) {
         if (!parse_uint(v, &e->powercut.cut_after))
           return Status::invalid_argument("expected powercut=N (cut at the Nth write or flush; 0: count only)");
         e->powercut.enabled = true;
         return Status();
       }},
      flag("tear", &e->powercut.tear),
      {"keep", Takes::value, [e](std::string_view v) {
         if (!parse_fraction(v, &e->powercut.keep)) return Status::invalid_argument("expected keep=F, a fraction 0..1");
         return Status();
       }},
  };
  add_fault_options(out, &t);
  return t;
}

std::vector<SubOption> nvme_options(DeviceSpec* out) {
  UringPassthruConfig* n = &out->nvme;
  std::vector<SubOption> t = {flag("regfiles", &n->regfiles), flag("fixedbufs", &n->fixedbufs),
                              flag("iopoll", &n->iopoll), flag("sqpoll", &n->sqpoll)};
  add_fault_options(out, &t);
  return t;
}

Status parse_null(const std::string& spec, DeviceSpec* out) {
  out->kind = DeviceSpec::Kind::null;
  if (spec == "null") return Status();
  const std::string size = spec.substr(5);
  if (!parse_size(size, &out->null_blk.size_bytes))
    return Status::invalid_argument("device '" + spec + "': size '" + size +
                                    "' is not a number with an optional K/M/G/T suffix");
  return Status();
}

Status parse_ram(const std::string& spec, DeviceSpec* out) {
  out->kind = DeviceSpec::Kind::ram;
  const std::string size = spec.substr(4);
  if (!parse_size(size, &out->ram_bytes) || out->ram_bytes < (1u << 20))
    return Status::invalid_argument("device '" + spec + "': expected ram:SIZE, at least 1M (K/M/G/T suffixes)");
  return Status();
}

// stripe:N, or stripe:DEV+DEV… whose members are parsed as device strings of their own.
Status parse_stripe(const std::string& spec, DeviceSpec* out) {
  out->kind = DeviceSpec::Kind::stripe;
  const std::string rest = spec.substr(7);
  if (rest.find('+') == std::string::npos) {
    uint64_t n;
    if (!parse_uint(rest, &n, 1, 16))
      return Status::invalid_argument("device '" + spec +
                                      "': expected stripe:N with N in 1..16, or stripe:DEV+DEV with 2..16 devices");
    out->stripe_children = unsigned(n);
    return Status();
  }
  std::vector<std::string> members;
  for (size_t at = 0;;) {
    const size_t plus = rest.find('+', at);
    members.push_back(rest.substr(at, plus == std::string::npos ? std::string::npos : plus - at));
    if (plus == std::string::npos) break;
    at = plus + 1;
  }
  if (members.size() > 16)
    return Status::invalid_argument("device '" + spec + "': " + std::to_string(members.size()) +
                                    " members, at most 16");
  for (const std::string& m : members) {
    DeviceSpec member;
    if (m.empty())
      return Status::invalid_argument("device '" + spec + "': an empty member (two '+' in a row, or one at an end)");
    if (m.rfind("stripe:", 0) == 0)
      return Status::invalid_argument("device '" + spec + "': member '" + m +
                                      "' is a stripe; a stripe cannot hold one");
    if (Status s = parse_device_spec(m, &member); !s.ok())
      return Status::invalid_argument("device '" + spec + "': " + s.message());
  }
  out->stripe_members = std::move(members);
  return Status();
}

}  // namespace

Status parse_device_spec(const std::string& spec, DeviceSpec* out) {
  *out = DeviceSpec{};
  if (spec.empty())
    return Status::invalid_argument(
        "empty device string (expected emu:PATH, nvme:/dev/ngXnY, null:SIZE, stripe:N, ram:SIZE or a path)");
  if (printable(spec) != spec)
    return Status::invalid_argument("device '" + printable(spec) + "' holds a control character");
  if (spec == "null" || spec.rfind("null:", 0) == 0) return parse_null(spec, out);
  if (spec.rfind("stripe:", 0) == 0) return parse_stripe(spec, out);
  if (spec.rfind("ram:", 0) == 0) return parse_ram(spec, out);

  const char* env = getenv("BIOFS_FAULT");
  const bool with_env = env && *env;
  const std::string where = "device '" + spec + "'" + (with_env ? " (with BIOFS_FAULT)" : "");
  const std::string full = with_env ? spec + "," + env : spec;
  const size_t comma = full.find(',');
  std::string path = full.substr(0, comma);
  const std::string options = comma == std::string::npos ? "" : full.substr(comma + 1);
  if (path.rfind("emu:", 0) == 0) {
    path = path.substr(4);
  } else if (path.rfind("nvme:", 0) == 0) {
    out->kind = DeviceSpec::Kind::nvme;
    path = path.substr(5);
  } else if (const size_t colon = path.find(':'); colon != std::string::npos && path.find('/') > colon) {
    return Status::invalid_argument(where + ": unknown kind '" + path.substr(0, colon) +
                                    ":' (expected emu:, nvme:, null:, stripe: or ram:)");
  }
  if (path.empty())
    return Status::invalid_argument(where + ": no path");
  out->emu.path = out->nvme.path = path;
  const bool emu = out->kind == DeviceSpec::Kind::emu;
  if (Status s = parse_suboptions(options, emu ? emu_options(out) : nvme_options(out), emu ? "emu:" : "nvme:");
      !s.ok())
    return Status::invalid_argument(where + ": " + s.message());
  if ((out->emu.powercut.tear || out->emu.powercut.keep > 0) && !out->emu.powercut.enabled)
    return Status::invalid_argument(where + ": tear and keep= need powercut=N");
  return Status();
}

}  // namespace biofs
