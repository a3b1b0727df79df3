#include "server/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace placementd {

namespace {

std::string refuse(const std::string& path, const std::string& why) {
  return "lock file " + path + ": " + why +
         "; refusing to use it (remove it, and check who can write to " +
         std::filesystem::path(path).parent_path().string() + ")";
}

}  // namespace

LockFile::LockFile(std::string path, const std::string& taken) : path_(std::move(path)) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  // Another daemon may unlink the file as it stops while this one opens it: a lock on the
  // unlinked file guards nothing, so it is taken again on what the path names now.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == ELOOP) throw std::runtime_error(refuse(path_, "it is a symbolic link"));
    if (fd_ < 0)
      throw std::runtime_error("cannot open lock file " + path_ + ": " + std::strerror(errno));
    struct stat st {};
    std::string wrong;
    if (::fstat(fd_, &st) != 0)
      wrong = std::string("cannot stat it: ") + std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
      wrong = "it is not a regular file";
    else if (st.st_nlink != 1)
      wrong = "it has " + std::to_string(st.st_nlink) + " hard links";
    if (!wrong.empty()) {
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(refuse(path_, wrong));
    }
    // Locked before its owner is judged: another user's daemon holding it (systemd's, under
    // DynamicUser) is "taken", not a file to remove. Nothing is written to it before both pass.
    const bool locked = ::flock(fd_, LOCK_EX | LOCK_NB) == 0;
    if (locked && st.st_uid != ::geteuid()) {
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(refuse(path_, "it belongs to uid " + std::to_string(st.st_uid) +
                                                 ", not to this daemon's " +
                                                 std::to_string(::geteuid())));
    }
    if (!locked) {
      char pid[32] = {};
      const ssize_t n = ::pread(fd_, pid, sizeof(pid) - 1, 0);
      ::close(fd_);
      fd_ = -1;
      std::string holder;
      for (ssize_t i = 0; i < n && pid[i] >= '0' && pid[i] <= '9'; ++i) holder += pid[i];
      throw std::runtime_error(taken + " (pid " + (holder.empty() ? "unknown" : holder) +
                               ", lock " + path_ + ")");
    }
    struct stat now {};
    if (::stat(path_.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt == 3)
      throw std::runtime_error("lock file " + path_ + " keeps being replaced while it is locked");
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

std::unique_ptr<LockFile> LockFile::for_socket(const std::string& socket_path) {
  return std::make_unique<LockFile>(socket_path + ".lock",
                                    "placementd already runs on " + socket_path);
}

std::unique_ptr<LockFile> LockFile::for_state_dir(const std::string& state_dir) {
  return std::make_unique<LockFile>(state_dir + "/placementd.lock",
                                    "another placementd uses the state directory " + state_dir);
}

}  // namespace placementd
