#!/usr/bin/env bash
# The block core's measured figures (blockcore/README.md "Measured"), reproducibly: every toggle
# A/B on the null device, tags per allocation call for each tag_batch mode in a run where
# batches come back partial, the striped target, and bi_io_vec's cache line (a second build).
# Usage: tools/bench-blockcore.sh [RUNTIME_SECONDS] [REPEATS]   (defaults 1 and 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rt=${1:-1}
reps=${2:-5}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target biofs-bench >/dev/null
cmake -S . -B build-line2 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBIOFS_BIO_IOVEC_SECOND_LINE=ON >/dev/null
cmake --build build-line2 --target biofs-bench >/dev/null
b=build/bin/biofs-bench
# No per-stage sampling (about 2.5 ns per I/O on the null device): figures comparable with the
# kernel's, whose block tracepoints are off unless asked for.
export BIOFS_STAGE_SAMPLE=0
echo "## machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"

echo; echo "## defaults: null device, 4 KiB, depth 128, batch 32, one thread"
$b --runtime "$((rt * 3))"

echo; echo "## bio cache off vs on"
$b --ab bio_cache --runtime "$rt" --repeats "$reps"

echo; echo "## split check fast vs iter"
$b --ab split_check --runtime "$rt" --repeats "$reps"

echo; echo "## tag_batch, partial batches: 2 threads share one 128-tag queue, 48 in flight each, completions after 20us"
partial="--irqmode timer --completion-nsec 20000 --threads 2 --qd 128 --depth 48"
$b --ab tag_batch=plain,retain $partial --runtime "$rt" --repeats "$reps"
$b --ab tag_batch=off,loop $partial --runtime "$rt" --repeats "$reps"

echo; echo "## tag_batch with inline completion (batches never partial)"
$b --ab tag_batch=off,loop --runtime "$rt" --repeats "$reps"

echo; echo "## two null devices striped (128 KiB chunks), 512-byte reads: one thread, then two"
$b --dev stripe:2 --bs 512 --runtime "$((rt * 2))" --quiet
$b --dev stripe:2 --bs 512 --threads 2 --runtime "$((rt * 2))" --quiet

echo; echo "## bi_io_vec in the first vs the second cache line (split_check=iter), alternating builds"
for i in $(seq "$reps"); do
  for build in build build-line2; do
    # The whole run's IOPS: with t/io_uring's output a run of 1 s prints no per-second line and
    # "Maximum IOPS=0".
    printf '%-12s ' "$build"; "$build/bin/biofs-bench" --split-check iter --runtime "$rt" --quiet |
      sed -n 's/^Whole run \(IOPS=[^,]*\),.*/\1/p'
  done
done
