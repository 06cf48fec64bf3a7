// Shared pieces of the reliability tests: scratch images, the workload's in-process backend
// (the Filesystem API, paths resolved with lookup), mkfs and fsck on a device string.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <dirent.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fs/filesystem.h"
#include "fs/fsck/fsck.h"
#include "fs/mkfs.h"
#include "devices/open_device.h"
#include "tests/devices/test_device.h"
#include "tests/fs/fsck_util.h"
#include "workload.h"

namespace biofs_test {

using namespace biofs;
using biofs::test::open_test_device;

// A scratch directory removed at the end of the test.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/biofs-rel-XXXXXX";
    REQUIRE(mkdtemp(tmpl.data()));
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

inline uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, nullptr, 10) : dflt;
}

// The filesystem's calls by path.
class FsBackend : public Backend {
 public:
  explicit FsBackend(Filesystem& fs) : fs_(fs) {}

  int resolve(const std::string& path, uint64_t* ino) {
    uint64_t cur = disk::ROOT_INO;
    size_t pos = 1;
    while (pos < path.size()) {
      const size_t slash = path.find('/', pos);
      const std::string name = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      struct stat st;
      if (int e = fs_.lookup(cur, name, &st)) return e;
      cur = st.st_ino;
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    *ino = cur;
    return 0;
  }
  int parent(const std::string& path, uint64_t* dir, std::string* name) {
    const size_t slash = path.rfind('/');
    *name = path.substr(slash + 1);
    return slash == 0 ? (*dir = disk::ROOT_INO, 0) : resolve(path.substr(0, slash), dir);
  }

  int create(const std::string& path) override {
    uint64_t d;
    std::string n;
    if (int e = parent(path, &d, &n)) return e;
    struct stat st;
    return fs_.mknod(d, n, S_IFREG | 0644, 0, 0, 0, &st);
  }
  int write(const std::string& path, uint64_t off, const std::string& data) override {
    uint64_t ino;
    if (int e = resolve(path, &ino)) return e;
    const ssize_t n = fs_.write(ino, off, data.size(), data.data());
    return n < 0 ? int(n) : n == ssize_t(data.size()) ? 0 : -EIO;
  }
  int truncate(const std::string& path, uint64_t size) override {
    uint64_t ino;
    if (int e = resolve(path, &ino)) return e;
    struct stat a{}, out;
    a.st_size = off_t(size);
    return fs_.setattr(ino, SETATTR_SIZE, a, &out);
  }
  int rename(const std::string& from, const std::string& to) override {
    uint64_t d1, d2;
    std::string n1, n2;
    if (int e = parent(from, &d1, &n1)) return e;
    if (int e = parent(to, &d2, &n2)) return e;
    return fs_.rename(d1, n1, d2, n2, 0);
  }
  int unlink(const std::string& path) override {
    uint64_t d;
    std::string n;
    if (int e = parent(path, &d, &n)) return e;
    return fs_.unlink(d, n);
  }
  int mkdir(const std::string& path) override {
    uint64_t d;
    std::string n;
    if (int e = parent(path, &d, &n)) return e;
    struct stat st;
    return fs_.mkdir(d, n, 0755, 0, 0, &st);
  }
  int rmdir(const std::string& path) override {
    uint64_t d;
    std::string n;
    if (int e = parent(path, &d, &n)) return e;
    return fs_.rmdir(d, n);
  }
  int fsync(const std::string& path) override {
    uint64_t ino;
    if (int e = resolve(path, &ino)) return e;
    return fs_.fsync(ino, false);
  }
  int read(const std::string& path, std::string* out) override {
    uint64_t ino;
    if (int e = resolve(path, &ino)) return e;
    struct stat st;
    if (int e = fs_.getattr(ino, &st)) return e;
    out->assign(size_t(st.st_size), '\0');
    size_t done = 0;
    while (done < out->size()) {
      const ssize_t n = fs_.read(ino, done, out->size() - done, out->data() + done);
      if (n < 0) return int(n);
      if (n == 0) break;
      done += size_t(n);
    }
    out->resize(done);
    return 0;
  }

 private:
  Filesystem& fs_;
};

// Every file and directory under `path`: path -> contents ("<dir>" for a directory). Reads
// each file whole, so an unreadable one shows up as an error. 0 or the first -errno.
inline int walk_tree(Filesystem& fs, const std::string& path, uint64_t ino, std::map<std::string, std::string>* out) {
  std::vector<std::pair<std::string, std::pair<uint64_t, unsigned>>> ents;
  if (int e = fs.readdir(ino, 0, [&](const std::string& n, uint64_t i, unsigned t, uint64_t) {
        if (n != "." && n != "..") ents.push_back({n, {i, t}});
        return true;
      }))
    return e;
  FsBackend be(fs);
  for (const auto& [name, it] : ents) {
    const std::string p = path + "/" + name;
    if (it.second == DT_DIR) {
      (*out)[p] = "<dir>";
      if (int e = walk_tree(fs, p, it.first, out)) return e;
    } else {
      std::string data;
      if (int e = be.read(p, &data)) return e;
      (*out)[p] = std::move(data);
    }
  }
  return 0;
}

// An opened device with its BlockIo, and perhaps a mounted filesystem.
struct Mounted {
  std::unique_ptr<Device> dev;
  std::unique_ptr<BlockIo> io;
  std::unique_ptr<Filesystem> fs;
  std::string err;
  void close() {  // filesystem, then its BlockIo, then the device
    fs.reset();
    io.reset();
    dev.reset();
  }
};

inline MountOptions test_mount_options() {
  MountOptions o;
  o.commit_interval_s = 0;  // commits on fsync, when the journal fills, and at unmount only
  return o;
}

// Opens `spec`; with `mount`, mounts it (fs stays null and err says why if that fails).
inline Mounted open_fs(const std::string& spec, bool mount = true, BioCache bio_cache = BioCache::on) {
  Mounted m;
  m.dev = open_test_device(spec, DeviceOptions{});
  m.io = std::make_unique<BlockIo>(m.dev->bdev(), 4096, bio_cache);
  REQUIRE(m.io->init() == 0);
  if (mount) m.err = Filesystem::mount(*m.io, test_mount_options(), &m.fs).message();
  return m;
}

// mkfs on a new image of `bytes` at `path` (journal kept small so commits checkpoint often).
inline void make_image(const std::string& path, uint64_t bytes, uint64_t journal_blocks = 128) {
  auto dev = open_test_device("emu:" + path + ",size=" + std::to_string(bytes), DeviceOptions{});
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  MkfsOptions mo;
  mo.journal_blocks = journal_blocks;
  mo.force = true;
  REQUIRE(make_filesystem(io, mo).message() == "");
}

// fsck -n on the image: "" when clean, else its error lines joined.
inline std::string fsck_errors(const std::string& path) {
  auto dev = open_test_device("emu:" + path, DeviceOptions{});
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  const biofs::test::FsckRun f = biofs::test::collect_fsck(io);
  if (f.r.fatal) return "fsck could not check: " + f.text("; ");
  return f.r.errors ? std::to_string(f.r.errors) + " errors: " + f.text("; ") : "";
}

inline void copy_file(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace biofs_test
