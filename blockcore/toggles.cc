#include "toggles.h"

#include "bio_set.h"

namespace biofs {

const char* bio_cache_name(BioCache mode) {
  switch (mode) {
    case BioCache::off: return "off";
    case BioCache::home: return "home";
    default: return "on";
  }
}

unsigned bio_cache_flags(BioCache mode) {
  switch (mode) {
    case BioCache::off: return 0;
    case BioCache::home: return BIOSET_PERCPU_CACHE | BIOSET_CACHE_HOME;
    default: return BIOSET_PERCPU_CACHE;
  }
}

const char* tag_batch_name(TagBatch mode) {
  switch (mode) {
    case TagBatch::off: return "off";
    case TagBatch::plain: return "plain";
    case TagBatch::retain: return "retain";
    case TagBatch::clamp: return "clamp";
    default: return "loop";
  }
}

const char* split_check_name(SplitCheck mode) { return mode == SplitCheck::fast ? "fast" : "iter"; }

const char* nomerges_name(NoMerges mode) {
  switch (mode) {
    case NoMerges::simple: return "1";
    case NoMerges::none: return "2";
    default: return "0";
  }
}

const std::vector<ToggleInfo>& toggle_table() {
  static const std::vector<ToggleInfo> table = {
      {"bio_cache", "on|off|home", "off", "on",
       [](Toggles* t, std::string_view v) {
         for (BioCache m : {BioCache::off, BioCache::on, BioCache::home})
           if (v == bio_cache_name(m)) return t->bio_cache = m, true;
         return false;
       },
       [](const Toggles& t) { return bio_cache_name(t.bio_cache); }},
      {"tag_batch", "off|plain|retain|loop|clamp", "plain", "retain",
       [](Toggles* t, std::string_view v) {
         for (TagBatch m : {TagBatch::off, TagBatch::plain, TagBatch::retain, TagBatch::loop, TagBatch::clamp})
           if (v == tag_batch_name(m)) return t->tag_batch = m, true;
         return false;
       },
       [](const Toggles& t) { return tag_batch_name(t.tag_batch); }},
      {"split_check", "fast|iter", "fast", "iter",
       [](Toggles* t, std::string_view v) {
         for (SplitCheck m : {SplitCheck::fast, SplitCheck::iter})
           if (v == split_check_name(m)) return t->split_check = m, true;
         return false;
       },
       [](const Toggles& t) { return split_check_name(t.split_check); }},
      // A: no merging (2), B: the kernel's default (0), as `biofs-compare --toggle nomerges=2,0`.
      {"nomerges", "0|1|2", "2", "0",
       [](Toggles* t, std::string_view v) {
         for (NoMerges m : {NoMerges::all, NoMerges::simple, NoMerges::none})
           if (v == nomerges_name(m)) return t->nomerges = m, true;
         return false;
       },
       [](const Toggles& t) { return nomerges_name(t.nomerges); }},
  };
  return table;
}

const ToggleInfo* find_toggle(std::string_view name) {
  for (const ToggleInfo& t : toggle_table())
    if (name == t.name) return &t;
  return nullptr;
}

std::string toggle_names() {
  std::string s;
  for (const ToggleInfo& t : toggle_table()) s += std::string(s.empty() ? "" : ", ") + t.name;
  return s;
}

Status set_toggle(Toggles* t, std::string_view name, std::string_view value) {
  const ToggleInfo* info = find_toggle(name);
  if (!info) return Status::invalid_argument("'" + std::string(name) + "' is not a toggle (" + toggle_names() + ")");
  if (!info->set(t, value))
    return Status::invalid_argument("bad value for " + std::string(name) + ": '" + std::string(value) +
                                    "' (expected " + info->values + ")");
  return Status();
}

}  // namespace biofs
