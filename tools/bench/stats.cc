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

Args::Args(int argc, char** argv, int first) {
  for (int i = first; i < argc; i++) args_.emplace_back(argv[i]);
  used_.assign(args_.size(), false);
}

bool Args::take(const std::string& name, std::string* value, bool wants_value) {
  const std::string key = "--" + name;
  for (size_t i = 0; i < args_.size(); i++) {
    if (used_[i]) continue;
    const std::string& a = args_[i];
    if (a == key) {
      used_[i] = true;
      if (!wants_value) return true;
      if (i + 1 >= args_.size()) throw std::invalid_argument("option " + key + " needs a value");
      used_[i + 1] = true;
      *value = args_[i + 1];
      return true;
    }
    if (wants_value && a.rfind(key + "=", 0) == 0) {
      used_[i] = true;
      *value = a.substr(key.size() + 1);
      return true;
    }
  }
  return false;
}

bool Args::flag(const std::string& name) {
  std::string unused;
  return take(name, &unused, false);
}

std::string Args::str(const std::string& name, const std::string& def) {
  std::string v;
  return take(name, &v, true) ? v : def;
}

long Args::integer(const std::string& name, long def, long min, long max) {
  std::string v;
  if (!take(name, &v, true)) return def;
  size_t end = 0;
  long n = 0;
  try {
    n = std::stol(v, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end != v.size() || v.empty() || n < min || n > max)
    throw std::invalid_argument("option --" + name + "=" + v + ": expected an integer in [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  return n;
}

double Args::real(const std::string& name, double def, double min, double max) {
  std::string v;
  if (!take(name, &v, true)) return def;
  size_t end = 0;
  double d = 0;
  try {
    d = std::stod(v, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end != v.size() || v.empty() || !(d >= min && d <= max))
    throw std::invalid_argument("option --" + name + "=" + v + ": expected a number in [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  return d;
}

void Args::finish() {
  for (size_t i = 0; i < args_.size(); i++)
    if (!used_[i]) throw std::invalid_argument("unknown option or stray argument: " + args_[i]);
}

}  // namespace biofs::bench
