#pragma once
// Lines a client can make the daemon log (a bad frame, a refused connection, a job attached) are
// limited per uid: a few per minute each, the rest counted and summed up in one line when the
// minute ends ("uid 1000: 2 227 more lines in the last 60 s, the last: ..."). Under a fuzzing
// client the daemon logged 2 227 lines a second, past journald's per-service rate limit, which then
// dropped the daemon's other lines, other users' job events among them.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace placementd {

class UidLogLimit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kDefaultLines = 20;
  static constexpr std::chrono::seconds kDefaultWindow{60};
  /// The longest a line is kept for its summary.
  static constexpr size_t kMaxKeptLine = 512;

  explicit UidLogLimit(size_t lines = kDefaultLines, Clock::duration window = kDefaultWindow);

  /// Whether `line`, about `uid`, may be logged now. If not, it is counted, and kept as the last
  /// one for the summary. Any thread.
  bool allow(uid_t uid, const std::string& line, Clock::time_point now = Clock::now());
  /// Logs `line` at `level` if allowed.
  void log(spdlog::level::level_enum level, uid_t uid, const std::string& line) {
    if (allow(uid, line)) spdlog::log(level, "{}", line);
  }
  /// One line for each uid whose window has ended with lines not logged, which starts its next.
  std::vector<std::string> summaries(Clock::time_point now = Clock::now());
  Clock::duration window() const { return window_; }

 private:
  struct Window {
    Clock::time_point start;
    size_t logged = 0;
    uint64_t dropped = 0;
    std::string last;
  };
  const size_t lines_;
  const Clock::duration window_;
  std::mutex mutex_;
  /// Uids that logged in their current window; a window that ended is dropped once summed up.
  std::map<uid_t, Window> windows_;
};

}  // namespace placementd
