#include "stats.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace biofs::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double spread(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double m = median(v);
  return m > 0 ? (*hi - *lo) / m : 0;
}

int online_cpus() { return std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN))); }

int pin_to_cpu(int cpu) {
  cpu %= online_cpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  return cpu;
}

}  // namespace biofs::bench
