// The emulated NVMe namespace (`emu:PATH`): a userspace controller with one namespace over a
// regular file or a block device, the counterpart of the NVMe target's file and block
// back-ends (drivers/nvme/target/io-cmd-file.c, io-cmd-bdev.c and the Identify half of
// admin-cmd.c). It executes the same 64-byte commands the passthrough transport sends, with
// io_uring reads, writes, fallocate and fsync on the backing file, and checks them as a
// controller does: namespace id, LBA range, MDTS, data length, opcode.
//
// Data moves with O_DIRECT when the backing file supports it and the I/O is aligned as the
// file needs (statx STATX_DIOALIGN); memory that is not aligned (FUSE buffers) goes through a
// per-command aligned bounce slot; an offset or length the file cannot take directly (512-byte
// blocks over a 4 KiB-sector device) goes through a second, buffered descriptor.
//
// Durability: without a volatile write cache (the default) every write is durable when it
// completes (RWF_DSYNC) and Flush has nothing to do. With `vwc` the controller has a volatile
// write cache (emu_write_cache.h, `vwc=SIZE`, 16 MiB by default): a write completes once it is
// copied there, a writer thread puts it on the backing file, and Flush waits for that and then
// runs fdatasync; a FUA write is on the file, synced, when it completes. `vwc=through` has no
// cache of its own: a write completes when the host has it, which for O_DIRECT means the host
// disk (the form before the cache; the A/B baseline). The cache is left out where every
// command runs inline (a file in memory) and under power-cut emulation, which keeps its own
// record of what a volatile cache would lose.
//
// Inline execution (`inline=`): a backing file in memory (tmpfs, ramfs) has no nowait I/O, so
// io_uring would hand every command to an io-wq worker thread: a hand-off and a wake-up per
// command for a 4 KiB memory copy. There the queue runs each command with a plain system call
// on the submitting thread, as brd copies in its submit_bio (drivers/block/brd.c) and as
// nvmet's file back-end runs a buffered command inline before it punts one to its workqueue
// (nvmet_file_execute_rw). The command is done when submit() returns and the submitter reaps
// it (NvmeQueue::completed_in_submit()): the I/O runs to completion where it started.
// `auto` also runs every Flush inline, on any file: io_uring hands an fsync to an io-wq worker
// whatever the file, so through the ring a flush costs a worker's wake-up and a reaper's, while
// its submitter sleeps anyway (a flush is waited for, as blkdev_issue_flush waits in
// submit_bio_wait; the filesystem issues no other kind).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

#include "emu_powercut.h"
#include "emu_write_cache.h"
#include "lib/status.h"
#include "nvme_spec.h"
#include "nvme_transport.h"

namespace biofs {

// For tests: a host answer put in place of the real one. The io_uring result of every
// `every`-th read, write, fsync or fallocate the queue reaps is replaced by `res` (a negative
// errno), or, with `short_xfer`, a read or write reports half its bytes done. These are what
// the host kernel gives under pressure: -ECANCELED when io_uring cannot start an io-wq worker
// for a request it had to punt (a pids cgroup or RLIMIT_NPROC at its limit), -EAGAIN, -EINTR,
// and short counts from a blocking read.
struct EmuHostFault {
  unsigned every = 0;  // 0: off
  int res = -ECANCELED;
  bool short_xfer = false;
};

enum class EmuInline : uint8_t {
  automatic,  // inline when the backing file is in memory (tmpfs, ramfs); flushes always
  on,         // always: the submitter also waits for a disk (a synchronous device)
  off,        // never: every command through io_uring
};

struct EmuConfig {
  std::string path;
  unsigned lba_size = 512;   // 512 or 4096: the namespace's one LBA format in use
  unsigned mdts = 5;         // MDTS: 4 KiB << mdts per command (5: 128 KiB); 0 = no limit
  bool vwc = false;          // volatile write cache present
  uint64_t write_cache_bytes = 16u << 20;  // with vwc: the cache's size; 0: vwc=through
  bool buffered = false;     // never use O_DIRECT
  EmuInline inline_io = EmuInline::automatic;  // inline=on|off|auto (above)
  uint64_t create_size = 0;  // create the file with this size if it does not exist
  PowerCutConfig powercut;   // power-cut emulation (emu_powercut.h); off by default
  EmuHostFault host_fault;   // tests only: injected host answers (above); off by default
};

class EmuNamespace final : public NvmeTransport {
 public:
  // Opens (or creates) the backing file into *out. Ok, or one line naming the path and the
  // reason: not_found for a missing file, invalid_argument for a bad setting or a file that is
  // not one a namespace can sit on, io_error when the system refuses.
  static Status open(const EmuConfig& cfg, std::unique_ptr<EmuNamespace>* out);
  ~EmuNamespace() override;

  std::string name() const override { return "emu:" + cfg_.path; }
  uint32_t nsid() const override { return 1; }
  int admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) override;
  Status create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) override;

  // What the emulated controller's queues read.
  const EmuConfig& config() const { return cfg_; }
  unsigned lba_shift() const { return lba_shift_; }
  uint64_t nlba() const { return nlba_; }
  uint32_t max_transfer() const { return cfg_.mdts ? NVME_CTRL_PAGE_SIZE << cfg_.mdts : 0; }
  bool direct() const { return direct_fd_ >= 0; }
  int direct_fd() const { return direct_fd_; }
  int buffered_fd() const { return buffered_fd_; }
  uint32_t dio_mem_align() const { return dio_mem_align_; }
  uint32_t dio_offset_align() const { return dio_offset_align_; }
  int zeroes_mode() const { return zeroes_mode_; }  // fallocate mode for Write Zeroes
  int dealloc_mode() const { return dealloc_mode_; }  // fallocate mode for deallocate
  bool memory_backed() const { return memory_backed_; }  // tmpfs or ramfs
  // Commands run by the submitting thread (inline=, above); the queues still take the ring
  // while injected host answers (tests) are on, since those stand for io_uring's.
  bool inline_io() const { return inline_io_; }
  // Flushes run by the submitting thread (inline=auto or on, above).
  bool inline_flush() const { return cfg_.inline_io != EmuInline::off; }

  // Tests: the injected host answers from now on (EmuConfig::host_fault at the start).
  void set_host_fault(const EmuHostFault& f) {
    fault_res_.store(f.res, std::memory_order_relaxed);
    fault_short_.store(f.short_xfer, std::memory_order_relaxed);
    fault_every_.store(f.every, std::memory_order_release);
  }
  unsigned host_fault_every() const { return fault_every_.load(std::memory_order_acquire); }
  EmuHostFault host_fault() const {
    return EmuHostFault{host_fault_every(), fault_res_.load(std::memory_order_relaxed),
                        fault_short_.load(std::memory_order_relaxed)};
  }

  // Commands the queues ran inline (inline=).
  uint64_t inline_commands() const { return inline_commands_.load(std::memory_order_relaxed); }
  void count_inline_command() { inline_commands_.fetch_add(1, std::memory_order_relaxed); }

  // Commands run again synchronously because the host answered one of their file operations
  // with a transient error or a short count (emu_queue.cc, EmuQueue::execute_sync).
  uint64_t host_retries() const { return host_retries_.load(std::memory_order_relaxed); }
  void count_host_retry() { host_retries_.fetch_add(1, std::memory_order_relaxed); }

  // The power-cut emulation, or nullptr when it is off (then the queues take their usual
  // io_uring path).
  EmuPowerCut* powercut() const { return powercut_.get(); }
  // The volatile write cache, or nullptr (vwc=through, no vwc, inline I/O, power cuts).
  EmuWriteCache* write_cache() const { return write_cache_.get(); }

  void identify_ctrl(NvmeIdCtrl* id) const;
  void identify_ns(NvmeIdNs* id) const;

 private:
  explicit EmuNamespace(const EmuConfig& cfg) : cfg_(cfg) {}
  Status init();  // open()'s work; the destructor closes whatever it opened

  EmuConfig cfg_;
  unsigned lba_shift_ = 9;
  uint64_t nlba_ = 0;
  int buffered_fd_ = -1;
  int direct_fd_ = -1;
  uint32_t dio_mem_align_ = 0, dio_offset_align_ = 0;
  int zeroes_mode_ = 0, dealloc_mode_ = 0;
  bool block_device_ = false;
  bool memory_backed_ = false;
  bool inline_io_ = false;
  std::unique_ptr<EmuPowerCut> powercut_;
  std::unique_ptr<EmuWriteCache> write_cache_;  // before the files close: it writes back into them
  std::atomic<uint64_t> host_retries_{0};
  std::atomic<uint64_t> inline_commands_{0};
  std::atomic<unsigned> fault_every_{0};
  std::atomic<int> fault_res_{0};
  std::atomic<bool> fault_short_{false};
};

}  // namespace biofs
