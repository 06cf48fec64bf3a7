#include "live_toggles.h"

#include <cerrno>
#include <nlohmann/json.hpp>

#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"
#include "blockcore/toggles.h"
#include "daemon_switches.h"
#include "devices/open_device.h"
#include "fuse_ops.h"
#include "mount_options.h"

namespace biofs {
namespace {

bool is_block_toggle(std::string_view name) { return find_toggle(name) != nullptr; }

// The daemon switches the I/O path reads live: an atomic each in FuseContext.
std::atomic<bool>* live_switch(FuseContext* ctx, std::string_view name) {
  if (name == "fuse_uring_plug") return &ctx->switches.ring_plug;
  if (name == "fuse_uring_hot") return &ctx->switches.ring_hot;
  return nullptr;
}

}  // namespace

LiveToggles::LiveToggles(Device* dev, BioSet* fs_bios, FuseContext* ctx)
    : dev_(dev), bio_sets_{fs_bios}, ctx_(ctx), changes_(names().size(), 0) {
  for (BioSet* b : dev->bio_sets()) bio_sets_.push_back(b);
}

const std::vector<std::string>& LiveToggles::names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const ToggleInfo& t : toggle_table()) v.push_back(t.name);
    v.push_back("fuse_uring_plug");
    v.push_back("fuse_uring_hot");
    return v;
  }();
  return n;
}

std::string LiveToggles::value_of(const std::string& name) const {
  if (const ToggleInfo* t = find_toggle(name)) {
    Toggles now;
    if (!dev_->queues().empty()) now = dev_->queues().front()->toggles();
    if (!bio_sets_.empty()) now.bio_cache = bio_sets_.front()->cache_mode();
    return t->get(now);
  }
  return live_switch(ctx_, name)->load(std::memory_order_relaxed) ? "on" : "off";
}

int LiveToggles::set(std::string_view assignment, std::string* why) {
  std::lock_guard lk(mu_);
  const size_t eq = assignment.find('=');
  const std::string name(assignment.substr(0, eq));
  const std::string value(eq == std::string_view::npos ? "" : assignment.substr(eq + 1));
  auto refuse = [&](int err, std::string line) {
    *why = last_refusal_ = std::move(line);
    return -err;
  };
  if (eq == std::string_view::npos || name.empty())
    return refuse(EINVAL, "'" + std::string(assignment) + "': expected NAME=VALUE");
  size_t index = 0;
  while (index < names().size() && names()[index] != name) index++;
  if (index == names().size()) {
    DaemonOptions scratch;  // a mount option that is not live, or nothing biofs knows
    if (Status s = parse_mount_options(std::string(assignment), &scratch); !s.ok()) return refuse(EINVAL, s.message());
    return refuse(EOPNOTSUPP, name + " cannot change on a mounted filesystem: it is set at mount (-o " + name +
                                  "=VALUE); the toggles that change live are " + [] {
                                    std::string all;
                                    for (const std::string& n : names()) all += (all.empty() ? "" : ", ") + n;
                                    return all;
                                  }());
  }
  if (is_block_toggle(name)) {
    Toggles next;
    if (!dev_->queues().empty()) next = dev_->queues().front()->toggles();
    if (Status s = set_toggle(&next, name, value); !s.ok()) return refuse(EINVAL, s.message());
    if (name == "bio_cache") {
      for (BioSet* bs : bio_sets_)
        if (!bs->set_cache_mode(next.bio_cache))
          return refuse(EOPNOTSUPP, "bio_cache: this mount's bio set has no cache to switch on");
    }
    for (RequestQueue* q : dev_->queues()) q->set_toggles(next);
  } else {
    const DaemonSwitch* sw = find_daemon_switch(name);
    DaemonOptions scratch;
    if (!sw->set(&scratch, value))
      return refuse(EINVAL, "bad value for " + name + ": '" + value + "' (expected " + sw->values + ")");
    live_switch(ctx_, name)->store(value == "on", std::memory_order_relaxed);
  }
  changes_[index]++;
  return 0;
}

nlohmann::ordered_json LiveToggles::stats() const {
  std::lock_guard lk(mu_);
  nlohmann::ordered_json j;
  for (size_t i = 0; i < names().size(); i++)
    j[names()[i]] = {{"value", value_of(names()[i])}, {"changes", changes_[i]}};
  j["last_refusal"] = last_refusal_;
  return j;
}

}  // namespace biofs
