// Extended attributes in the inode's inline area: entries of u8 name_len, u8 value_len, name,
// value, packed from the start; xattr_len bytes used. Names carry their namespace ("user.x").
#include <sys/xattr.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

#include "filesystem.h"

namespace biofs {

using namespace disk;

namespace {

struct Attr {
  std::string name, value;
};

bool unpack(const Inode& d, std::vector<Attr>* out) {
  if (d.xattr_len > INLINE_XATTR_BYTES) return false;  // a damaged inode: never read past the area
  for (uint32_t p = 0; p < d.xattr_len;) {
    if (p + 2 > d.xattr_len) return false;
    const uint32_t nl = d.xattr[p], vl = d.xattr[p + 1];
    if (nl == 0 || p + 2 + nl + vl > d.xattr_len) return false;
    const char* base = reinterpret_cast<const char*>(d.xattr) + p + 2;
    out->push_back({std::string(base, nl), std::string(base + nl, vl)});
    p += 2 + nl + vl;
  }
  return true;
}

bool pack(Inode& d, const std::vector<Attr>& attrs) {
  uint32_t p = 0;
  uint8_t buf[INLINE_XATTR_BYTES] = {};
  for (const Attr& a : attrs) {
    if (a.name.size() > 255 || a.value.size() > 255 || p + 2 + a.name.size() + a.value.size() > sizeof(buf)) return false;
    buf[p] = uint8_t(a.name.size());
    buf[p + 1] = uint8_t(a.value.size());
    std::memcpy(buf + p + 2, a.name.data(), a.name.size());
    std::memcpy(buf + p + 2 + a.name.size(), a.value.data(), a.value.size());
    p += uint32_t(2 + a.name.size() + a.value.size());
  }
  std::memcpy(d.xattr, buf, sizeof(buf));
  d.xattr_len = uint16_t(p);
  return true;
}

}  // namespace

int Filesystem::setxattr(uint64_t ino, const std::string& name, const std::string& value, int flags) {
  std::unique_lock ex(lock_);
  if (name.empty() || name.size() > 255) return name.empty() ? -EINVAL : -ERANGE;
  if (int err = maybe_commit()) return err;
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (!unpack(in->d, &attrs)) return -EUCLEAN;
  auto it = std::find_if(attrs.begin(), attrs.end(), [&](const Attr& a) { return a.name == name; });
  if (it != attrs.end() && (flags & XATTR_CREATE)) return -EEXIST;
  if (it == attrs.end() && (flags & XATTR_REPLACE)) return -ENODATA;
  if (it != attrs.end()) it->value = value;
  else attrs.push_back({name, value});
  if (!pack(in->d, attrs)) return -ENOSPC;  // only small attributes fit inline (format.md)
  touch(in->d, false, false, true);
  return isave(in);
}

int Filesystem::getxattr(uint64_t ino, const std::string& name, std::string* value) {
  std::unique_lock ex(lock_);
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (!unpack(in->d, &attrs)) return -EUCLEAN;
  for (const Attr& a : attrs)
    if (a.name == name) {
      *value = a.value;
      return 0;
    }
  return -ENODATA;
}

int Filesystem::listxattr(uint64_t ino, std::string* names) {
  std::unique_lock ex(lock_);
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (!unpack(in->d, &attrs)) return -EUCLEAN;
  names->clear();
  for (const Attr& a : attrs) names->append(a.name).push_back('\0');
  return 0;
}

int Filesystem::removexattr(uint64_t ino, const std::string& name) {
  std::unique_lock ex(lock_);
  if (int err = maybe_commit()) return err;
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  std::vector<Attr> attrs;
  if (!unpack(in->d, &attrs)) return -EUCLEAN;
  auto it = std::find_if(attrs.begin(), attrs.end(), [&](const Attr& a) { return a.name == name; });
  if (it == attrs.end()) return -ENODATA;
  attrs.erase(it);
  pack(in->d, attrs);
  touch(in->d, false, false, true);
  return isave(in);
}

}  // namespace biofs
