#include "stripe.h"

#include <algorithm>

namespace biofs {

StripeTarget::StripeTarget(std::vector<BlockDevice*> children, uint32_t chunk_sectors)
    : children_(std::move(children)),
      chunk_sectors_(chunk_sectors),
      chunk_shift_(unsigned(__builtin_ctz(chunk_sectors ? chunk_sectors : 1))),
      clone_set_(64, 0, BIOSET_PERCPU_CACHE) {}  // a cache slot always: bio_cache is live

Status StripeTarget::create(std::vector<BlockDevice*> children, uint32_t chunk_sectors, BioCache bio_cache,
                            std::unique_ptr<StripeTarget>* out) {
  out->reset();
  std::unique_ptr<StripeTarget> t(new StripeTarget(std::move(children), chunk_sectors));
  if (Status s = t->init(bio_cache); !s.ok()) return s;
  *out = std::move(t);
  return Status();
}

// stripe_ctr(): the geometry first, then the clone set.
Status StripeTarget::init(BioCache bio_cache) {
  const uint32_t chunk_sectors = chunk_sectors_;
  if (children_.empty()) return Status::invalid_argument("stripe: no child devices");
  if (!chunk_sectors || (chunk_sectors & (chunk_sectors - 1)))
    return Status::invalid_argument("stripe: chunk of " + std::to_string(chunk_sectors) +
                                    " sectors is not a power of two");
  sector_t smallest = children_[0]->capacity;
  for (BlockDevice* child : children_) {
    smallest = std::min(smallest, child->capacity);
    if (child->queue && (child->queue->limits().logical_block_size >> SECTOR_SHIFT) > chunk_sectors)
      return Status::invalid_argument("stripe: chunk smaller than a child's logical block");
  }
  if (int ret = clone_set_.init(); ret) return Status::from_errno(ret, bioset_init_error(ret));
  clone_set_.set_cache_mode(bio_cache);
  const sector_t per_child = smallest & ~sector_t(chunk_sectors - 1);
  bdev_.capacity = per_child * children_.size();
  bdev_.submit_bio_fn = &StripeTarget::submit;
  bdev_.private_data = this;
  bdev_.name = "stripe" + std::to_string(children_.size());
  return Status();
}

unsigned StripeTarget::map_sector(sector_t sector, sector_t* child_sector) const {
  const sector_t chunk = sector >> chunk_shift_;
  const unsigned n = unsigned(children_.size());
  *child_sector = ((chunk / n) << chunk_shift_) | (sector & (chunk_sectors_ - 1));
  return unsigned(chunk % n);
}

void StripeTarget::submit(BlockDevice* bdev, Bio* bio) {
  auto* self = static_cast<StripeTarget*>(bdev->private_data);
  if (bio_end_sector(bio) > bdev->capacity) {
    bio_io_error(bio);
    return;
  }
  if (bio_op(bio) == REQ_OP_FLUSH) {  // a flush goes to every child
    for (BlockDevice* child : self->children_) {
      Bio* clone = bio_alloc_clone(child, bio, GFP_KERNEL, &self->clone_set_);
      bio_chain(clone, bio);
      submit_bio(clone);
    }
    bio_endio(bio);
    return;
  }
  // One clone per chunk-sized piece; the parent's own count is dropped at the end so it ends
  // when the last clone does.
  BvecIter it = bio->bi_iter;
  while (it.bi_size) {
    const uint32_t to_boundary =
        (self->chunk_sectors_ - uint32_t(it.bi_sector & (self->chunk_sectors_ - 1))) << SECTOR_SHIFT;
    const uint32_t len = std::min(it.bi_size, to_boundary);
    sector_t child_sector;
    BlockDevice* child = self->children_[self->map_sector(it.bi_sector, &child_sector)];
    Bio* clone = bio_alloc_clone(child, bio, GFP_KERNEL, &self->clone_set_);
    clone->bi_iter = it;
    clone->bi_iter.bi_size = len;
    clone->bi_iter.bi_sector = child_sector;
    bio_chain(clone, bio);
    self->clones_.fetch_add(1, std::memory_order_relaxed);
    if (bio_no_advance_iter(bio))
      it.bi_size -= len;
    else
      bvec_iter_advance(bio->bi_io_vec, it, len);
    it.bi_sector += len >> SECTOR_SHIFT;
    submit_bio(clone);
  }
  bio_endio(bio);
}

}  // namespace biofs
