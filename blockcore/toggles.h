// The block-layer toggles a user flips to see an idea end to end. Each is one row of
// toggle_table() (toggles.cc): its name (the mount option, the bench's --NAME and --ab NAME, the
// stats key), its values and what they do, its default, and the pair an A/B run compares.
// Adding a toggle is a field here, a row there, and its use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/status.h"

namespace biofs {

// tag_batch=: how a plugged submitter asks for tags (blk_mq_get_new_requests).
enum class TagBatch : uint8_t {
  off,     // one tag per allocation call
  plain,   // the plug's first allocation asks for nr_ios, then nr_ios = 1 (before "blk-mq: retry
           // batch allocation of tags", 2025)
  retain,  // after a short batch the plug keeps data.nr_tags, so the rest is asked for in a batch
  loop,    // the batch allocator takes word after word until it has them all (upstream 6.19)
  clamp,   // loop, and each batch asks for at most one sbitmap word's bits (biofs's older form).
           // v6.18's __sbitmap_queue_get_batch() gives no batch when nr_tags exceeds a word's
           // bits (a plug of 32 on a queue of depth < 128, whose words are 16 bits or fewer);
           // clamp batches there a word at a time instead
};

// bio_cache=: whether bio sets keep a per-CPU (per-thread) bio cache, and where a put goes.
enum class BioCache : uint8_t {
  off,   // no cache: every bio comes from and goes back to the mempool
  on,    // v6.18 bio_put_percpu_cache(): a put goes to the putting CPU's cache (bio_set.h rule 4)
  home,  // a put returns the bio to the cache of the thread that allocated it: biofs's older
         // form, before `on` refilled a submitter's cache from its completion thread's puts
};

// split_check=: which bio_may_need_split() form a queue uses.
enum class SplitCheck : uint8_t {
  fast,  // bi_vcnt == 1 and the vec fits a page: the form before "block: fix bio_may_need_split()
         // by using bvec iterator way" (2025), wrong for bios whose bi_vcnt does not describe
         // their iterator (clones, caller bvec tables)
  iter,  // the iterator's current vec covers the whole bio and fits: that commit's check
};

// nomerges=: the queue's sysfs `nomerges` (block/blk-sysfs.c, v6.18), what bio merging a queue
// tries (blk_rq_merge.h). The kernel's values and meanings:
enum class NoMerges : uint8_t {
  all = 0,     // every merge: the plug merge (blk_attempt_plug_merge), the default
  simple = 1,  // QUEUE_FLAG_NOXMERGES: only an elevator's extended (hash) merges stop. biofs, as a
               // v6.18 queue with no elevator ("none", NVMe's default), has none of those, so the
               // plug merge still runs: 1 merges exactly as 0 does, as the kernel's does
  none = 2,    // QUEUE_FLAG_NOMERGES: blk_queue_nomerges(): no merge is tried at all, and
               // blk_add_rq_to_plug() drops its BLK_PLUG_FLUSH_SIZE test
};

struct Toggles {
  BioCache bio_cache = BioCache::on;
  TagBatch tag_batch = TagBatch::loop;
  SplitCheck split_check = SplitCheck::iter;
  NoMerges nomerges = NoMerges::all;
};

struct ToggleInfo {
  const char* name;
  const char* values;  // "on|off": what set() takes
  const char* ab_a;    // the A/B pair: the baseline, then the idea
  const char* ab_b;
  bool (*set)(Toggles* t, std::string_view value);
  const char* (*get)(const Toggles& t);
};

const std::vector<ToggleInfo>& toggle_table();
const ToggleInfo* find_toggle(std::string_view name);  // nullptr if no toggle has that name

// Sets toggle `name` to `value`. Ok, or invalid_argument with one line naming what is wrong.
Status set_toggle(Toggles* t, std::string_view name, std::string_view value);

// "bio_cache, tag_batch, split_check, nomerges": for usage lines and errors.
std::string toggle_names();

const char* bio_cache_name(BioCache mode);
// The bioset_flags a set made under `mode` takes: BIOSET_PERCPU_CACHE, with BIOSET_CACHE_HOME.
unsigned bio_cache_flags(BioCache mode);
const char* tag_batch_name(TagBatch mode);
const char* split_check_name(SplitCheck mode);
const char* nomerges_name(NoMerges mode);  // "0", "1", "2"

}  // namespace biofs
