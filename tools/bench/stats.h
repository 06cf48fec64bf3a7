// Small helpers shared by the benchmark modes: medians, CPU pinning, clocks, option parsing.
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

// Parses "--name=value" or "--name value" style options; throws std::invalid_argument with a
// one-line message naming the option on anything malformed.
class Args {
 public:
  Args(int argc, char** argv, int first);
  bool flag(const std::string& name);  // --name (no value)
  std::string str(const std::string& name, const std::string& def);
  long integer(const std::string& name, long def, long min, long max);
  double real(const std::string& name, double def, double min, double max);
  void finish();  // throws if an option was given that nobody asked for

 private:
  bool take(const std::string& name, std::string* value, bool wants_value);
  std::vector<std::string> args_;
  std::vector<bool> used_;
};

}  // namespace biofs::bench
