#include "open_device.h"

#include <stdexcept>

#include "blockcore/null_blk.h"
#include "device_lock.h"
#include "blockcore/stripe.h"
#include "nvme/emu_ns.h"
#include "nvme/fault_inject.h"
#include "nvme/nvme_driver.h"
#include "nvme/uring_passthru.h"
#include "settle.h"

namespace biofs {

std::vector<RequestQueue*> Device::queues() const {
  std::vector<RequestQueue*> qs;
  if (nvme_) qs.push_back(nvme_->bdev()->queue);
  for (const auto& n : nulls_) qs.push_back(n->queue());
  if (brd_) qs.push_back(brd_->queue());
  for (const auto& m : members_)
    for (RequestQueue* q : m->queues()) qs.push_back(q);
  return qs;
}

bool Device::stats(DeviceStats* d) const {
  if (!nvme_) return false;
  d->name = nvme_->transport()->name();
  d->doorbells = nvme_->doorbells();
  d->cover_misses = nvme_->cover_misses();
  d->retries = nvme_->retries();
  d->fixed_buffer_cmds = nvme_->fixed_buffer_cmds();
  if (!emu_) return true;
  d->inline_io = emu_->inline_io();
  d->inline_flush = emu_->inline_flush();
  d->inline_commands = emu_->inline_commands();
  d->host_retries = emu_->host_retries();
  if (const EmuWriteCache* wc = emu_->write_cache()) {
    d->write_cache_bytes = wc->capacity();
    d->write_cache = wc->stats();
  }
  return true;
}

uint64_t Device::inflight() const {
  uint64_t n = nvme_ ? nvme_->inflight() : 0;
  for (const auto& m : members_) n += m->inflight();
  return n;
}

int Device::poll(bool wait) {
  int n = nvme_ ? nvme_->poll_all(wait) : 0;
  for (const auto& m : members_) n += m->poll(wait && !n);
  return n;
}

namespace {

std::unique_ptr<NullBlk> make_null(NullBlkConfig cfg, const DeviceOptions& opts) {
  cfg.nr_queues = opts.queues;
  cfg.queue_depth = opts.qd;
  cfg.irqmode = opts.null_irqmode;
  cfg.completion_nsec = opts.null_completion_nsec;
  cfg.toggles = opts.toggles;
  return std::make_unique<NullBlk>(cfg);
}

}  // namespace

std::unique_ptr<Device> open_device(const std::string& spec, const DeviceOptions& opts) {
  DeviceSpec ds;
  std::string err;
  if (!parse_device_spec(spec, &ds, &err)) throw std::invalid_argument(err);
  return open_device(ds, spec, opts);
}

std::unique_ptr<Device> open_device(const DeviceSpec& ds, const std::string& spec, const DeviceOptions& opts) {
  auto dev = std::make_unique<Device>();
  dev->spec_ = spec;
  dev->kind_ = ds.kind;
  switch (ds.kind) {
    case DeviceSpec::Kind::null:
      dev->nulls_.push_back(make_null(ds.null_blk, opts));
      dev->bdev_ = dev->nulls_[0]->bdev();
      return dev;
    case DeviceSpec::Kind::stripe: {
      std::vector<BlockDevice*> children;
      for (unsigned i = 0; i < ds.stripe_children; i++) {
        dev->nulls_.push_back(make_null(ds.null_blk, opts));
        children.push_back(dev->nulls_.back()->bdev());
      }
      for (const std::string& member : ds.stripe_members) {
        dev->members_.push_back(open_device(member, opts));
        children.push_back(dev->members_.back()->bdev());
      }
      dev->stripe_ = std::make_unique<StripeTarget>(children, opts.stripe_chunk_sectors, opts.toggles.bio_cache);
      dev->bdev_ = dev->stripe_->bdev();
      return dev;
    }
    case DeviceSpec::Kind::ram:
      dev->brd_ = std::make_unique<BrdDevice>(ds.ram_bytes, 512, opts.toggles, opts.queues, opts.qd);
      dev->bdev_ = dev->brd_->bdev();
      return dev;
    case DeviceSpec::Kind::emu:
    case DeviceSpec::Kind::nvme:
      break;
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
  } else if (opts.settle && ds.kind == DeviceSpec::Kind::emu && !opts.completion_thread) {
    transport = make_settle_transport(std::move(transport));
  }
  NvmeDriverConfig cfg;
  cfg.nr_queues = opts.queues;
  cfg.queue_depth = opts.qd;
  cfg.completion_thread = opts.completion_thread;
  cfg.completion_affinity = opts.completion_affinity;
  cfg.nr_poll_queues = opts.poll_queues;
  cfg.cover_look_ms = opts.cover_look_ms;
  cfg.toggles = opts.toggles;
  cfg.max_retries = ds.max_retries;
  dev->nvme_ = std::make_unique<NvmeDriver>(std::move(transport), cfg);
  dev->bdev_ = dev->nvme_->bdev();
  return dev;
}

std::unique_ptr<Device> open_device_locked(const std::string& spec, const DeviceOptions& opts, DeviceLock* lock,
                                           bool exclusive, const char* tool, std::string* err) {
  DeviceSpec ds;
  if (!parse_device_spec(spec, &ds, err)) return nullptr;
  if (std::string why = lock->acquire(ds, exclusive, 10000, tool); !why.empty()) {
    *err = why;
    return nullptr;
  }
  try {
    return open_device(ds, spec, opts);
  } catch (const std::exception& e) {
    *err = e.what();
    return nullptr;
  }
}

}  // namespace biofs
