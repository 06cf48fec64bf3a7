// `biofs-bench alloc`: ns per bio alloc+put pair through a BioSet with the per-CPU cache off
// and on, interleaved, repeated, reported as medians and on/off ratios.
#pragma once

namespace biofs::bench {
int alloc_main(int argc, char** argv);  // argv[0] is "alloc"
}
