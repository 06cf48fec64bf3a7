// A seeded mixed workload for the crash and fault tests — creates, writes, appends, truncates,
// renames, unlinks, fsyncs and directory churn — run against a Backend (the Filesystem API in
// process, or system calls on a FUSE mount), with a model of what each fsync made durable.
//
// The promise checked after a crash: a file whose fsync returned 0, and which nothing touched
// after that (no write, truncate, rename or unlink of it), exists at its path with exactly the
// contents it had at the fsync. Everything else may be in any state fsck accepts.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace biofs_test {

// What the workload needs from a filesystem; each call returns 0 or -errno.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int create(const std::string& path) = 0;
  virtual int write(const std::string& path, uint64_t off, const std::string& data) = 0;
  virtual int truncate(const std::string& path, uint64_t size) = 0;
  virtual int rename(const std::string& from, const std::string& to) = 0;
  virtual int unlink(const std::string& path) = 0;
  virtual int mkdir(const std::string& path) = 0;
  virtual int rmdir(const std::string& path) = 0;
  virtual int fsync(const std::string& path) = 0;
  virtual int read(const std::string& path, std::string* out) = 0;  // whole file
};

struct Rng {  // splitmix64: the same sequence for the same seed everywhere
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 7) {}
  uint64_t next() {
    uint64_t x = (s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

inline std::string pattern_data(size_t n, uint64_t tag) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = char('a' + ((i * 131 + tag * 7919) >> 3) % 26);
  return s;
}

class Workload {
 public:
  explicit Workload(uint64_t seed, unsigned max_file_kib = 48) : rng_(seed), max_bytes_(max_file_kib << 10) {}

  // Top-level directories the files live in; made first (and fsync'd) by setup().
  static constexpr int kDirs = 3;
  int setup(Backend& be) {
    for (int i = 0; i < kDirs; i++)
      if (int e = be.mkdir("/d" + std::to_string(i))) return e;
    return be.fsync("/d0");
  }

  // One operation. Returns its result (0 or -errno); the model follows only what succeeded,
  // and marks what it touched either way.
  int step(Backend& be) {
    ops_++;
    const uint64_t r = rng_.below(100);
    if (files_.empty() || r < 14) return op_create(be);
    // fsync goes half the time to the file the last operation touched: the usual pattern.
    const std::string f = r >= 77 && files_.count(last_) && rng_.below(2) ? last_ : pick_file();
    if (r < 34) return op_write(be, f, false);
    if (r < 46) return op_write(be, f, true);
    if (r < 53) return op_truncate(be, f);
    if (r < 61) return op_rename(be, f);
    if (r < 67) return op_unlink(be, f);
    if (r < 77) return op_dir_churn(be);
    return op_fsync(be, f);
  }

  // Checks the promise against a backend mounted after the crash. Returns "" or the first
  // broken promise, in one line.
  std::string check(Backend& be) const {
    for (const auto& [path, data] : synced_) {
      std::string got;
      if (int e = be.read(path, &got)) return path + ": fsync'd, then unreadable (" + std::to_string(e) + ")";
      if (got != data)
        return path + ": fsync'd with " + std::to_string(data.size()) + " bytes, now " + std::to_string(got.size()) +
               (got.size() == data.size() ? " bytes that differ" : " bytes");
    }
    return "";
  }

  // After a remount that may have lost changes the workload made (a failed commit keeps the
  // disk as of the last good one): only what check() vouched for is known now.
  void remounted() {
    for (const auto& [path, data] : files_)
      if (!synced_.count(path)) unknown_.insert(path);
  }

  size_t synced_files() const { return synced_.size(); }
  uint64_t ops() const { return ops_; }
  uint64_t fsyncs_ok() const { return fsyncs_ok_; }
  const std::map<std::string, std::string>& files() const { return files_; }

 private:
  std::string pick_file() {
    auto it = files_.begin();
    std::advance(it, long(rng_.below(files_.size())));
    return it->first;
  }
  std::string new_name(const char* prefix) {
    return "/d" + std::to_string(rng_.below(kDirs)) + "/" + prefix + std::to_string(next_id_++);
  }
  void touch(const std::string& path) {
    synced_.erase(path);
    last_ = path;
  }
  // A failed operation may have changed part of what it aimed at: its files' contents are
  // unknown from then on, and a later fsync of them promises nothing we can check.
  int result(int e, const std::string& a, const std::string& b = "") {
    if (e) {
      unknown_.insert(a);
      if (!b.empty()) unknown_.insert(b);
    }
    return e;
  }

  int op_create(Backend& be) {
    const std::string p = new_name("f");
    touch(p);
    const int e = result(be.create(p), p);
    if (e == 0) files_[p] = "";
    if (e) return e;
    return op_write(be, p, true);
  }
  int op_write(Backend& be, const std::string& p, bool append) {
    std::string& cur = files_[p];
    const uint64_t len = 1 + rng_.below(rng_.below(4) == 0 ? 20000 : 3000);
    uint64_t off = append ? cur.size() : rng_.below(cur.size() + 1);
    if (off + len > max_bytes_) off = rng_.below(max_bytes_ - len);
    const std::string data = pattern_data(len, rng_.next());
    touch(p);
    const int e = result(be.write(p, off, data), p);
    if (e == 0) {
      if (cur.size() < off + len) cur.resize(off + len, '\0');
      cur.replace(off, len, data);
    }
    return e;
  }
  int op_truncate(Backend& be, const std::string& p) {
    std::string& cur = files_[p];
    const uint64_t size = rng_.below(4) == 0 ? cur.size() + rng_.below(9000) : rng_.below(cur.size() + 1);
    touch(p);
    const int e = result(be.truncate(p, size), p);
    if (e == 0) cur.resize(size, '\0');
    return e;
  }
  int op_rename(Backend& be, const std::string& p) {
    const std::string to = new_name("r");
    touch(p), touch(to);
    const int e = result(be.rename(p, to), p, to);
    if (e == 0) {
      if (unknown_.count(p)) unknown_.insert(to);
      files_[to] = std::move(files_[p]);
      files_.erase(p);
    }
    return e;
  }
  int op_unlink(Backend& be, const std::string& p) {
    touch(p);
    const int e = result(be.unlink(p), p);
    if (e == 0) files_.erase(p);
    return e;
  }
  // Empty subdirectories come and go, and move between the top-level directories.
  int op_dir_churn(Backend& be) {
    if (dirs_.empty() || rng_.below(3) == 0) {
      const std::string d = new_name("s");
      const int e = be.mkdir(d);
      if (e == 0) dirs_.insert(d);
      return e;
    }
    auto it = dirs_.begin();
    std::advance(it, long(rng_.below(dirs_.size())));
    const std::string d = *it;
    if (rng_.below(2)) {
      const int e = be.rmdir(d);
      if (e == 0) dirs_.erase(d);
      return e;
    }
    const std::string to = new_name("s");
    const int e = be.rename(d, to);
    if (e == 0) {
      dirs_.erase(d);
      dirs_.insert(to);
    }
    return e;
  }
  int op_fsync(Backend& be, const std::string& p) {
    const int e = be.fsync(p);
    if (e == 0) {
      if (!unknown_.count(p)) synced_[p] = files_[p];
      fsyncs_ok_++;
    }
    return e;
  }

  Rng rng_;
  const uint64_t max_bytes_;
  uint64_t next_id_ = 0, ops_ = 0, fsyncs_ok_ = 0;
  std::map<std::string, std::string> files_;   // what the files hold, as far as we know
  std::set<std::string> dirs_;                 // empty subdirectories
  std::map<std::string, std::string> synced_;  // fsync'd and untouched since
  std::set<std::string> unknown_;              // touched by an operation that failed
  std::string last_;                           // the file the last operation touched
};

}  // namespace biofs_test
