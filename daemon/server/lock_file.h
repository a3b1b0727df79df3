#pragma once
// Guards what one daemon owns against a second one: its socket path (so a stale socket can be
// removed safely) and its state directory (two daemons would overwrite each other's results).

#include <memory>
#include <string>

namespace placementd {

/// Holds an exclusive flock on `path` for its lifetime and records the pid in it. The file must be
/// a regular file of this process's user with one link: a symbolic or hard link planted in a
/// directory another user can write is refused, never followed or truncated.
class LockFile {
 public:
  /// Throws std::runtime_error if another process holds the lock (`taken` and " (pid N, lock
  /// PATH)") or the file cannot be created or is refused (naming it and why).
  LockFile(std::string path, const std::string& taken);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

  /// "<socket>.lock" for the daemon on `socket_path`.
  static std::unique_ptr<LockFile> for_socket(const std::string& socket_path);
  /// "placementd.lock" in `state_dir`.
  static std::unique_ptr<LockFile> for_state_dir(const std::string& state_dir);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace placementd
