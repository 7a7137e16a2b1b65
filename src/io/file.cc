#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tactician/tensor.h"

namespace tac::io {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

Result<Fd> open_regular_file(const std::string& path, int64_t* size, const char* what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then refuses it); it changes
  // nothing for regular files.
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return io_error(path + ": cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return io_error(path + ": cannot stat the file: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + ": not a regular file");
  if (size) *size = st.st_size;
  return fd;
}

Result<std::string> read_file(const std::string& path, const char* what) {
  int64_t size = 0;
  TAC_ASSIGN_OR_RETURN(Fd fd, open_regular_file(path, &size, what));
  if (static_cast<uint64_t>(size) > max_tensor_bytes())
    return out_of_memory(path + ": the file's " + bytes_to_string(static_cast<uint64_t>(size)) +
                         " are more than this machine's memory");
  std::string out(static_cast<size_t>(size), '\0');
  for (size_t done = 0; done < out.size();) {
    ssize_t n = pread(fd.get(), out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path + ": read error: " + std::strerror(errno));
    if (n == 0) {  // shrank while read
      out.resize(done);
      break;
    }
    done += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace tac::io
