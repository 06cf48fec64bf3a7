#include "open_device.h"

#include "blockcore/brd.h"
#include "blockcore/null_blk.h"
#include "device_lock.h"
#include "blockcore/stripe.h"
#include "nvme/emu_ns.h"
#include "nvme/fault_inject.h"
#include "nvme/nvme_driver.h"
#include "nvme/uring_passthru.h"
#include "settle.h"

namespace biofs {

Device::Device() = default;
Device::~Device() = default;

std::vector<RequestQueue*> Device::queues() const {
  std::vector<RequestQueue*> qs;
  if (nvme_) qs.push_back(nvme_->bdev()->queue);
  for (const auto& n : nulls_) qs.push_back(n->queue());
  if (brd_) qs.push_back(brd_->queue());
  for (const auto& m : members_)
    for (RequestQueue* q : m->queues()) qs.push_back(q);
  return qs;
}

std::vector<BioSet*> Device::bio_sets() const {
  std::vector<BioSet*> sets;
  if (stripe_) sets.push_back(&stripe_->clone_set());
  for (const auto& m : members_)
    for (BioSet* b : m->bio_sets()) sets.push_back(b);
  return sets;
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

Status make_null(NullBlkConfig cfg, const DeviceOptions& opts, std::unique_ptr<NullBlk>* out) {
  cfg.nr_queues = opts.queues;
  cfg.queue_depth = opts.qd;
  cfg.irqmode = opts.null_irqmode;
  cfg.completion_nsec = opts.null_completion_nsec;
  cfg.toggles = opts.toggles;
  return NullBlk::create(cfg, out);
}

}  // namespace

Status open_device(const std::string& spec, const DeviceOptions& opts, std::unique_ptr<Device>* out) {
  out->reset();
  DeviceSpec ds;
  if (Status s = parse_device_spec(spec, &ds); !s.ok()) return s;
  return open_device(ds, spec, opts, out);
}

Status open_device(const DeviceSpec& ds, const std::string& spec, const DeviceOptions& opts,
                   std::unique_ptr<Device>* out) {
  out->reset();
  auto dev = std::make_unique<Device>();
  dev->spec_ = spec;
  dev->kind_ = ds.kind;
  // Each layer's set-up says why it failed in one line: the block layer's and the NVMe driver's
  // checks of their settings (queues, depth, chunk) and of what the system or the device refused.
  switch (ds.kind) {
    case DeviceSpec::Kind::null: {
      std::unique_ptr<NullBlk> null;
      if (Status s = make_null(ds.null_blk, opts, &null); !s.ok()) return s;
      dev->nulls_.push_back(std::move(null));
      dev->bdev_ = dev->nulls_[0]->bdev();
      break;
    }
    case DeviceSpec::Kind::stripe: {
      std::vector<BlockDevice*> children;
      for (unsigned i = 0; i < ds.stripe_children; i++) {
        std::unique_ptr<NullBlk> null;
        if (Status s = make_null(ds.null_blk, opts, &null); !s.ok()) return s;
        dev->nulls_.push_back(std::move(null));
        children.push_back(dev->nulls_.back()->bdev());
      }
      for (const std::string& member : ds.stripe_members) {
        std::unique_ptr<Device> m;
        if (Status s = open_device(member, opts, &m); !s.ok()) return s;
        dev->members_.push_back(std::move(m));
        children.push_back(dev->members_.back()->bdev());
      }
      if (Status s = StripeTarget::create(children, opts.stripe_chunk_sectors, opts.toggles.bio_cache, &dev->stripe_);
          !s.ok())
        return s;
      dev->bdev_ = dev->stripe_->bdev();
      break;
    }
    case DeviceSpec::Kind::ram:
      if (Status s = BrdDevice::create(ds.ram_bytes, 512, opts.toggles, opts.queues, opts.qd, &dev->brd_); !s.ok())
        return s;
      dev->bdev_ = dev->brd_->bdev();
      break;
    case DeviceSpec::Kind::emu:
    case DeviceSpec::Kind::nvme: {
      std::unique_ptr<NvmeTransport> transport;
      if (ds.kind == DeviceSpec::Kind::emu) {
        std::unique_ptr<EmuNamespace> emu;
        if (Status s = EmuNamespace::open(ds.emu, &emu); !s.ok()) return s;
        dev->emu_ = emu.get();
        transport = std::move(emu);
      } else {
        std::unique_ptr<UringPassthru> passthru;
        if (Status s = UringPassthru::open(ds.nvme, &passthru); !s.ok()) return s;
        transport = std::move(passthru);
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
      if (Status s = NvmeDriver::create(std::move(transport), cfg, &dev->nvme_); !s.ok()) return s;
      dev->bdev_ = dev->nvme_->bdev();
      break;
    }
  }
  *out = std::move(dev);
  return Status();
}

Status open_device_locked(const std::string& spec, const DeviceOptions& opts, DeviceLock* lock, bool exclusive,
                          const char* tool, std::unique_ptr<Device>* out) {
  out->reset();
  DeviceSpec ds;
  if (Status s = parse_device_spec(spec, &ds); !s.ok()) return s;
  if (Status s = lock->acquire(ds, exclusive, 10000, tool); !s.ok()) return s;
  return open_device(ds, spec, opts, out);
}

}  // namespace biofs
