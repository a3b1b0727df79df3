#include "placement/library_output.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace placement {

namespace {

std::mutex& stdout_mutex() {
  static std::mutex m;
  return m;
}

// fd 1 moved to a memory file while it lives; put back (and the file read) by release().
class MovedStdout {
 public:
  MovedStdout() {
    std::fflush(stdout);
    file_ = ::memfd_create("placement-stdout", MFD_CLOEXEC);
    if (file_ < 0) return;
    saved_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved_ < 0 || ::dup2(file_, STDOUT_FILENO) < 0) release();
  }
  ~MovedStdout() { release(); }
  MovedStdout(const MovedStdout&) = delete;
  MovedStdout& operator=(const MovedStdout&) = delete;

  std::string release() {
    std::string text;
    if (saved_ >= 0) {
      std::fflush(stdout);
      ::dup2(saved_, STDOUT_FILENO);
      ::close(saved_);
      saved_ = -1;
      char buf[1024];
      const ssize_t n = ::pread(file_, buf, sizeof(buf), 0);
      if (n > 0) text.assign(buf, static_cast<size_t>(n));
    }
    if (file_ >= 0) ::close(file_);
    file_ = -1;
    return text;
  }

 private:
  int file_ = -1;
  int saved_ = -1;
};

}  // namespace

std::string capture_stdout(const std::function<void()>& call) {
  const std::lock_guard<std::mutex> lock(stdout_mutex());
  MovedStdout moved;
  call();
  return moved.release();
}

}  // namespace placement
