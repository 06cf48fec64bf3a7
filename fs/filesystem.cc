// The filesystem's face: a mount's parts made and wired to the state they share; the
// operations forward to them (filesystem.h).
#include "filesystem.h"

#include <cstring>

namespace biofs {

using namespace disk;

Filesystem::Filesystem(BlockIo& io, const SuperBlock& sb, const MountOptions& opts)
    : s_(io, sb, opts), itable_(s_), extents_(s_), dirs_(s_), namei_(s_), files_(s_), file_io_(s_), xattrs_(s_),
      super_(s_) {
  s_.itable = &itable_;
  s_.extents = &extents_;
  s_.dirs = &dirs_;
  s_.namei = &namei_;
  s_.files = &files_;
  s_.file_io = &file_io_;
  s_.xattrs = &xattrs_;
  s_.super = &super_;
}

Status Filesystem::mount(BlockIo& io, const MountOptions& opts, std::unique_ptr<Filesystem>* out) {
  out->reset();
  SuperBlock sb;
  io.set_block_size(4096);
  if (std::string why = read_superblock(io, &sb); !why.empty()) return Status::io_error(why);
  io.set_block_size(sb.block_size);
  std::unique_ptr<Filesystem> fs(new Filesystem(io, sb, opts));
  if (int e = fs->super_.start()) return Status::io_error(std::string("mount failed: ") + strerror(-e));
  *out = std::move(fs);
  return Status();
}

Filesystem::~Filesystem() {
  if (s_.mounted) super_.unmount();
}

}  // namespace biofs
