#pragma once

#include "blockcore/bio.h"
#include "blockcore/blk_mq.h"

namespace biofs {

// A bio-based switch in front of two devices, for biofs-bench fsio's `null:SIZE`:
// `null:SIZE` keeps no data, so no filesystem could be mounted on it alone: the filesystem is
// made and mounted on a RAM disk of the same size, and from the warm-up on (when only file data
// moves: see bios_in_region) every bio is aimed at the null device instead. A bio-based remap in
// front of the two, as dm-linear's: one indirect call and a resubmission per bio.
struct NullRemap {
  BlockDevice bdev;
  BlockDevice* meta = nullptr;
  BlockDevice* data = nullptr;
  bool to_data = false;
  static void submit(BlockDevice* b, Bio* bio) {
    auto* self = static_cast<NullRemap*>(b->private_data);
    bio->bi_bdev = self->to_data ? self->data : self->meta;
    submit_bio(bio);
  }
};

}  // namespace biofs
