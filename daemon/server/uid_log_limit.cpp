#include "server/uid_log_limit.h"

namespace placementd {

UidLogLimit::UidLogLimit(size_t lines, Clock::duration window) : lines_(lines), window_(window) {}

bool UidLogLimit::allow(uid_t uid, const std::string& line, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto [it, fresh] = windows_.try_emplace(uid);
  Window& w = it->second;
  if (fresh) w.start = now;
  if (w.logged < lines_) {
    ++w.logged;
    return true;
  }
  ++w.dropped;
  w.last = line.size() > kMaxKeptLine ? line.substr(0, kMaxKeptLine) + "..." : line;
  return false;
}

std::vector<std::string> UidLogLimit::summaries(Clock::time_point now) {
  std::vector<std::string> out;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(window_).count();
  std::lock_guard lock(mutex_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.start < window_) {
      ++it;
      continue;
    }
    if (it->second.dropped > 0)
      out.push_back("uid " + std::to_string(it->first) + ": " + std::to_string(it->second.dropped) +
                    " more lines not logged in the last " + std::to_string(seconds) +
                    " s (at most " + std::to_string(lines_) +
                    " a uid), the last: " + it->second.last);
    it = windows_.erase(it);
  }
  return out;
}

}  // namespace placementd
