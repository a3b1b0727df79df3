#include "server/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace placementd {

LockFile::LockFile(const std::string& socket_path) : path_(socket_path + ".lock") {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open lock file " + path_ + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof(pid) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw std::runtime_error("placementd already runs on " + socket_path + " (pid " + holder + ", lock " + path_ + ")");
  }
  const std::string text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) < 0) {
    // The lock itself is what matters; the pid is only a courtesy for the message above.
  }
}

LockFile::~LockFile() {
  if (fd_ >= 0) {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
}

}  // namespace placementd
