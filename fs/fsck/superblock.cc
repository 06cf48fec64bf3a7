// The superblock, before the passes: e2fsck/super.c (check_super_block) and the backup search of
// e2fsck/util.c (get_backup_sb). A damaged primary is restored from the backup (-y only) and at
// once marked "error", before the journal replays over it, so a repair cut short shows; a
// damaged backup is rewritten from the primary; a filesystem not cleanly unmounted is marked
// clean when the repairs are written (a check warns of it).
#include <cstring>

#include "fs/fsck/engine.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

bool Engine::superblock() {
  io.set_block_size(4096);
  const std::string why = read_superblock(io, &sb, false);
  if (!why.empty()) {
    // Mount takes the backup only while the primary still says biofs (anything else may be
    // another filesystem); a repair the user asked for looks when the magic is gone too.
    if (!find_backup_superblock(io, &sb)) {
      fatal("primary superblock: " + why + "; no backup superblock found either");
      return false;
    }
    fix(false, "primary superblock: " + why, "restored from the backup");
    if (checking()) note("using the backup superblock");
    sb_fix = true;
  }
  bs = sb.block_size;
  io.set_block_size(bs);
  if (!why.empty() && may_write()) {  // before the journal replays over it
    IoBuf b(bs);
    SuperBlock w = sb;
    w.state = STATE_ERROR;
    w.checksum = superblock_crc(w);
    std::memcpy(b.data(), &w, sizeof(w));
    if (int err = io.write(0, 1, b.data(), REQ_PREFLUSH | REQ_FUA)) {
      fatal(std::string("cannot write the superblock: ") + strerror(-err));
      return false;
    }
    r.changed = true;
  }
  IoBuf b(bs);
  if (!read(sb.backup_sb_block, 1, b.data())) return false;
  SuperBlock bk;
  std::memcpy(&bk, b.data(), sizeof(bk));
  if (!backup_superblock_ok(bk, sb, io.device_bytes())) {
    fix(true, "backup superblock is damaged", "rewritten from the primary");
    sb_fix = true;
  }
  if (sb.state != STATE_CLEAN) {  // marked clean at the end, not an error
    sb_fix = true;
    if (checking()) warn("filesystem was not cleanly unmounted");
  }
  return true;
}

}  // namespace biofs::fsck
