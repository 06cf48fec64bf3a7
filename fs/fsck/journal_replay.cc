// The journal, before the passes: e2fsck/journal.c (e2fsck_check_ext3_journal, and
// e2fsck_run_ext3_journal for the replay). A journal superblock failing its header or checksum,
// from another filesystem or with its head out of range is reset to an empty journal (-y only);
// a committed transaction is replayed before the passes read anything, unless other repairs
// wait for -y. A check replays nothing: it warns, and the passes read the disk as it is.
#include <cstring>

#include "fs/fsck/engine.h"
#include "fs/io_buf.h"
#include "fs/journal.h"

namespace biofs::fsck {

using namespace disk;

bool Engine::journal() {
  IoBuf b(bs);
  if (!read(sb.journal_start, 1, b.data())) return false;
  if (const std::vector<std::string> bad = check_journal_super(b.data(), sb); !bad.empty()) {
    fix(false, bad.front(), "reset to an empty journal (nothing in it is replayed)");
    reset_journal = true;
    return true;
  }
  Journal jn(io, sb);
  int n = 0;
  if (!may_write()) {
    jn.recover(&n, false);  // a dry run: reads only
    if (n && checking()) warn("journal holds a committed transaction that mounting will replay (checked as the disk is now)");
    else if (n) report("journal holds a committed transaction: not replayed while other repairs need -y");
    return true;
  }
  if (std::string e = jn.recover(&n, true); !e.empty()) {
    fatal(e);
    return false;
  }
  if (!n) return true;
  r.changed = true;
  lines.push_back(Line{"journal", "replayed " + num(n) + " committed transaction" + (n > 1 ? "s" : ""), true, true});
  replayed = 1;
  // The superblock itself may have been replayed (it is logged when the orphan list changes).
  SuperBlock now;
  if (read_superblock(io, &now, false).empty() && std::memcmp(now.uuid, sb.uuid, 16) == 0 &&
      now.block_count == sb.block_count && now.inode_count == sb.inode_count && now.block_size == sb.block_size)
    sb = now;
  sb_fix = true;
  return true;
}

}  // namespace biofs::fsck
