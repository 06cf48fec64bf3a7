// The idle-cache trimmer: one blockcore thread that, every BIO_CACHE_TRIM_INTERVAL_MS, calls
// trim_idle_caches() on every bio set created with BIOSET_TRIM_IDLE, so that a thread which
// stopped issuing I/O (an idle FUSE worker, say) does not hold its cached bios forever. The
// kernel's twin is the CPU-hotplug callback bio_cpu_dead() (block/bio.c), which empties a
// CPU's cache when the CPU goes away; a userspace thread that stays alive but idle needs a
// timer instead. The thread runs only while some set is registered.
#pragma once

namespace biofs {

class BioSet;

inline constexpr unsigned BIO_CACHE_TRIM_INTERVAL_MS = 5000;

// The interval in use: BIO_CACHE_TRIM_INTERVAL_MS, or BIOFS_BIO_CACHE_TRIM_MS from the
// environment when the first set registers (the tests shorten it).
unsigned bio_cache_trim_interval_ms();

// BioSet's constructor and destructor call these for BIOSET_TRIM_IDLE sets; unregister returns
// only once no trim of that set is running.
void bio_cache_trim_register(BioSet* bs);
void bio_cache_trim_unregister(BioSet* bs);

}  // namespace biofs
