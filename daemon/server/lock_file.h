#pragma once
// Guards a socket path against a second daemon, so a stale socket can be removed safely.

#include <string>

namespace placementd {

/// Holds an exclusive flock on "<socket>.lock" for its lifetime and records the pid in it.
class LockFile {
 public:
  /// Throws std::runtime_error if another process holds the lock ("placementd already runs on
  /// SOCKET as pid N") or the file cannot be created.
  explicit LockFile(const std::string& socket_path);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace placementd
