// The result of setup and configuration: parsing device strings, mount options and toggles,
// opening a device, taking its lock, making and mounting a filesystem. Either ok, or an error
// holding one line of text (what the user reads, word for word) and a kind a tool may use to
// choose its exit code. Outputs go through pointer parameters, as in LevelDB's leveldb::Status:
//   std::unique_ptr<Device> dev;
//   if (Status s = open_device(spec, opts, &dev); !s.ok()) fail(s.message());
// The I/O path does not use it: it keeps -errno (fs/, the daemon's replies) and blk_status_t
// (blockcore/, the drivers), which cost nothing when all is well.
#pragma once

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>

namespace biofs {

// No operator bool: whether true would mean "ok" or "failed" is a guess; ok() says it.
class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    ok,
    invalid_argument,  // the text given is wrong: a device string, an option, a flag
    not_found,         // what it names does not exist: a backing file, a device node
    io_error,          // the system or the device refused: open, read, write, lock, ring set-up
    busy,              // another process holds it: a mounted image, a tool's lock
  };

  Status() = default;  // ok

  static Status invalid_argument(std::string msg) { return Status(Code::invalid_argument, std::move(msg)); }
  static Status not_found(std::string msg) { return Status(Code::not_found, std::move(msg)); }
  static Status io_error(std::string msg) { return Status(Code::io_error, std::move(msg)); }
  static Status busy(std::string msg) { return Status(Code::busy, std::move(msg)); }
  // For a set-up step that returns -errno as its kernel twin does (blk-mq, sbitmap, mempool,
  // bio sets): -EINVAL is invalid_argument, -ENOENT not_found, -EBUSY busy, any other io_error.
  static Status from_errno(int neg_errno, std::string msg) {
    switch (neg_errno) {
      case -EINVAL: return invalid_argument(std::move(msg));
      case -ENOENT: return not_found(std::move(msg));
      case -EBUSY: return busy(std::move(msg));
      default: return io_error(std::move(msg));
    }
  }

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  // The one line; empty when ok().
  const std::string& message() const { return msg_; }

 private:
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  Code code_ = Code::ok;
  std::string msg_;
};

}  // namespace biofs
