// Reading files that may be hostile: only regular files are opened (a FIFO would block the
// reader, a device like /dev/zero would never end), without waiting, and sizes are checked
// against the machine's memory before anything is read.
#pragma once

#include <string>

#include "tactician/status.h"

namespace tac::io {

// An open file descriptor that closes itself.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// `path` opened for reading when it is a regular file (symlinks followed); `size` gets its size.
// Errors name the path and `what` it should be: "<path>: cannot open the plan: <errno text>",
// "<path>: not a regular file".
Result<Fd> open_regular_file(const std::string& path, int64_t* size = nullptr, const char* what = "the file");
// The whole of a regular file.
Result<std::string> read_file(const std::string& path, const char* what = "the file");

}  // namespace tac::io
