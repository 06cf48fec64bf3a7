// Extended attributes and POSIX ACLs through the mount, with the ordinary tools (cp -a, cp -p,
// mv, tar --xattrs --acls, rsync -X, setfacl/getfacl, setcap/getcap, setfattr), as root and as
// a second user, against what ext4 does.
#include <doctest/doctest.h>

#include <grp.h>
#include <sys/xattr.h>

#include <functional>
#include <string>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

bool have_tool(const char* t) { return run(std::string("command -v ") + t) == 0; }

std::string sh(const std::string& cmd) {
  std::string out;
  CHECK_MESSAGE(run(cmd, &out) == 0, cmd << ": " << out);
  return out;
}

struct Mount {
  FuseScratch s{256 << 20};
  pid_t pid;
  Mount() {
    REQUIRE(chmod(s.dir.c_str(), 0755) == 0);
    pid = mount_fg(s.img, s.mnt, "allow_other");
    REQUIRE(chmod(s.mnt.c_str(), 0755) == 0);
  }
  void finish() {
    unmount(s.mnt, pid);
    std::string out;
    CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  }
};

}  // namespace

TEST_CASE("fuse xattr: attributes of ext4's sizes: 255-byte names, values of a block's size, many at once") {
  if (!have_fuse()) return;
  Mount m;
  const std::string f = m.s.mnt + "/f";
  write_file(f, "x");
  const std::string v30(30, 'a'), v20(20, 'b'), v3k(3000, 'c');
  CHECK(setxattr(f.c_str(), "user.thirty", v30.data(), v30.size(), 0) == 0);
  CHECK(setxattr(f.c_str(), "user.twenty1", v20.data(), v20.size(), 0) == 0);
  CHECK(setxattr(f.c_str(), "user.twenty2", v20.data(), v20.size(), 0) == 0);
  CHECK(setxattr(f.c_str(), "user.big", v3k.data(), v3k.size(), 0) == 0);
  const std::string long_name = "user." + std::string(250, 'n');
  CHECK(setxattr(f.c_str(), long_name.c_str(), "1", 1, 0) == 0);
  const std::string too_long = long_name + "x";
  CHECK(setxattr(f.c_str(), too_long.c_str(), "1", 1, 0) == -1);
  CHECK(errno == ERANGE);
  CHECK(setxattr(f.c_str(), "foo.bar", "1", 1, 0) == -1);  // a namespace ext4 does not know
  CHECK(errno == EOPNOTSUPP);
  CHECK(setxattr(f.c_str(), "trusted.t", "1", 1, 0) == 0);  // root
  CHECK(errno_as_nobody([&] { char b[4]; return int(getxattr(f.c_str(), "trusted.t", b, sizeof(b))); }) == ENODATA);
  unmount(m.s.mnt, m.pid);
  m.pid = mount_fg(m.s.img, m.s.mnt, "allow_other");
  char buf[4096];
  CHECK(getxattr(f.c_str(), "user.big", buf, sizeof(buf)) == 3000);
  CHECK(std::string(buf, 3000) == v3k);
  CHECK(getxattr(f.c_str(), "user.thirty", buf, sizeof(buf)) == 30);
  CHECK(getxattr(f.c_str(), long_name.c_str(), buf, sizeof(buf)) == 1);
  m.finish();
}

TEST_CASE("fuse xattr: cp -a, cp -p, mv, tar --xattrs --acls and rsync -X keep attributes and ACLs") {
  if (!have_fuse()) return;
  Mount m;
  // A source tree on the local filesystem with an ACL, a default ACL and user attributes.
  char tmpl[] = "/tmp/biofs-src-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const std::string src = tmpl;
  sh("cp -r /usr/include/linux " + src + "/tree");
  sh("setfacl -m u:nobody:rw " + src + "/tree/fs.h && setfacl -d -m u:nobody:rx " + src + "/tree");
  sh("setfattr -n user.note -v '" + std::string(40, 'z') + "' " + src + "/tree/fs.h");
  const std::string mnt = m.s.mnt;
  std::string out;
  CHECK_MESSAGE(run("cp -a " + src + "/tree " + mnt + "/a", &out) == 0, out);
  CHECK(out.empty());
  CHECK_MESSAGE(run("cp -rp " + src + "/tree " + mnt + "/p", &out) == 0, out);
  CHECK_MESSAGE(run("diff -r " + src + "/tree " + mnt + "/a", &out) == 0, out);
  CHECK(sh("getfacl -p -c " + mnt + "/a/fs.h") == sh("getfacl -p -c " + src + "/tree/fs.h"));
  CHECK(sh("getfacl -p -c -d " + mnt + "/a") == sh("getfacl -p -c -d " + src + "/tree"));
  CHECK(sh("getfattr --absolute-names --only-values -n user.note " + mnt + "/a/fs.h") == std::string(40, 'z'));
  // mv across filesystems: silent, nothing left behind.
  write_file(src + "/moved", "m");
  sh("setfacl -m u:nobody:r " + src + "/moved");
  CHECK_MESSAGE(run("mv " + src + "/moved " + mnt + "/", &out) == 0, out);
  CHECK(out.empty());
  CHECK(sh("getfacl -p -c " + mnt + "/moved").find("user:nobody:r--") != std::string::npos);
  // tar with attributes and ACLs, both ways.
  sh("tar --xattrs --acls -C " + src + " -cf " + src + "/t.tar tree");
  sh("mkdir " + mnt + "/t && tar --xattrs --acls -C " + mnt + "/t -xf " + src + "/t.tar");
  CHECK(sh("getfacl -p -c " + mnt + "/t/tree/fs.h") == sh("getfacl -p -c " + src + "/tree/fs.h"));
  if (have_tool("rsync")) {
    CHECK_MESSAGE(run("rsync -aAX " + src + "/tree/ " + mnt + "/r/", &out) == 0, out);
    CHECK(sh("getfattr --absolute-names --only-values -n user.note " + mnt + "/r/fs.h") == std::string(40, 'z'));
  }
  std::filesystem::remove_all(src);
  m.finish();
}

TEST_CASE("fuse xattr: ACLs: setfacl/getfacl, the mode in step, inheritance, enforcement for a second user") {
  if (!have_fuse()) return;
  Mount m;
  const std::string mnt = m.s.mnt, f = mnt + "/f", d = mnt + "/d";
  write_file(f, "secret");
  REQUIRE(chmod(f.c_str(), 0600) == 0);
  CHECK(errno_as_nobody([&] { return open(f.c_str(), O_RDONLY); }) == EACCES);
  sh("setfacl -m u:nobody:r " + f);
  CHECK(errno_as_nobody([&] { return open(f.c_str(), O_RDONLY); }) == 0);
  CHECK(errno_as_nobody([&] { return open(f.c_str(), O_WRONLY); }) == EACCES);
  struct stat st;
  REQUIRE(stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);  // group bits show the mask
  REQUIRE(chmod(f.c_str(), 0600) == 0);  // the mask goes to ---: the named entry is masked out
  CHECK(sh("getfacl -p -c " + f).find("mask::---") != std::string::npos);
  CHECK(errno_as_nobody([&] { return open(f.c_str(), O_RDONLY); }) == EACCES);
  sh("setfacl -b " + f);  // remove it all: only the mode is left
  CHECK(sh("getfacl -p -c " + f) == "user::rw-\ngroup::---\nother::---\n\n");
  // A default ACL: new files and directories get it, the umask does not apply, directories
  // pass it on.
  REQUIRE(mkdir(d.c_str(), 0755) == 0);
  sh("setfacl -d -m u:nobody:rwx,g::r-x,o::--- " + d);
  sh("umask 077 && touch " + d + "/file && mkdir " + d + "/sub");
  REQUIRE(stat((d + "/file").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);  // 0666 masked by the default ACL (group: mask rwx & rw-), not the umask
  CHECK(sh("getfacl -p -c " + d + "/file").find("user:nobody:rwx\t#effective:rw-") != std::string::npos);
  CHECK(sh("getfacl -p -c -d " + d + "/sub") == sh("getfacl -p -c -d " + d));
  CHECK(errno_as_nobody([&] { return open((d + "/file").c_str(), O_RDWR); }) == 0);
  // Without a default ACL the umask applies.
  sh("umask 077 && touch " + mnt + "/plain");
  REQUIRE(stat((mnt + "/plain").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  unmount(m.s.mnt, m.pid);
  m.pid = mount_fg(m.s.img, m.s.mnt, "allow_other");
  CHECK(sh("getfacl -p -c -d " + d + "/sub").find("user:nobody:rwx") != std::string::npos);
  m.finish();
}

TEST_CASE("fuse xattr: setcap/getcap, a write or a chown clears the capability, as on ext4") {
  if (!have_fuse() || !have_tool("setcap")) return;
  Mount m;
  const std::string p = m.s.mnt + "/prog";
  sh("cp /bin/true " + p);
  sh("setcap cap_net_raw+ep " + p);
  CHECK(sh("getcap " + p).find("cap_net_raw=ep") != std::string::npos);
  sh("echo >> " + p);
  CHECK(sh("getcap " + p).empty());
  sh("setcap cap_net_raw+ep " + p);
  sh("chown nobody " + p);
  CHECK(sh("getcap " + p).empty());
  m.finish();
}
