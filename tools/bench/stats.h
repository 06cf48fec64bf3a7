// Small helpers shared by the benchmark modes: medians, CPU pinning, clocks. (Options: CLI11.)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace biofs::bench {

double median(std::vector<double> v);
// Spread of a sample as (max - min) / median, so "2%" reads as the width of the noise.
double spread(const std::vector<double>& v);
// Pins the calling thread to `cpu` modulo the number of CPUs; returns the CPU used.
int pin_to_cpu(int cpu);
int online_cpus();

inline uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace biofs::bench
