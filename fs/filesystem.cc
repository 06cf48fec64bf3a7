// The filesystem's face: a mount's parts made and wired to the state they share; the
// operations forward to them (filesystem.h).
#include "filesystem.h"

#include <cstring>

namespace biofs {

using namespace disk;

Filesystem::Filesystem(BlockIo& io, const SuperBlock& sb, const MountOptions& opts)
    : s_(io, sb, opts),
      itable_(s_),
      xattrs_(s_, itable_),
      extents_(s_, itable_),
      evict_(s_, itable_, extents_, xattrs_),
      dirs_(s_, extents_),
      super_(s_, itable_, evict_),
      file_io_(s_, itable_, extents_, xattrs_, super_),
      files_(s_, itable_, extents_, xattrs_, file_io_, evict_),
      namei_(s_, itable_, dirs_, extents_, file_io_, xattrs_, evict_) {}

Status Filesystem::mount(BlockIo& io, const MountOptions& opts, std::unique_ptr<Filesystem>* out) {
  out->reset();
  SuperBlock sb;
  io.set_block_size(4096);
  if (std::string why = read_superblock(io, &sb); !why.empty()) return Status::io_error(why);
  io.set_block_size(sb.block_size);
  std::unique_ptr<Filesystem> fs(new Filesystem(io, sb, opts));
  // The end-io worker's batches go to FileIo, which Super (below it) does not know.
  auto conversions = [f = fs.get()](std::vector<EndIoWork::Item*>& items) { f->file_io_.finish_conversions(items); };
  if (int e = fs->super_.start(std::move(conversions)))
    return Status::io_error(std::string("mount failed: ") + strerror(-e));
  *out = std::move(fs);
  return Status();
}

Filesystem::~Filesystem() {
  if (s_.mounted) super_.unmount();
}

}  // namespace biofs
