#include "server/uid_backlog.h"

namespace placementd {

void UidBacklog::done(uint64_t bytes) {
  const uint64_t held = bytes_.fetch_sub(bytes) - bytes;
  if (waiters_.load() == 0) return;
  std::vector<std::function<void()>> resume;
  {
    std::lock_guard lock(mutex_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (held <= it->first) {
        resume.push_back(std::move(it->second));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    waiters_.store(waiting_.size());
  }
  for (auto& r : resume) r();
}

bool UidBacklog::wait(uint64_t bytes, uint64_t cap, std::function<void()> resume) {
  std::lock_guard lock(mutex_);
  // Checked under the lock, after waiters_ is raised: a done() that brought the backlog down
  // meanwhile either finds this waiter or left a backlog this check admits.
  waiters_.store(waiting_.size() + 1);
  if (admits(bytes, cap)) {
    waiters_.store(waiting_.size());
    return false;
  }
  // Admitted when nothing waits, too, so a request over the cap waits for the backlog to empty.
  waiting_.emplace_back(bytes <= cap ? cap - bytes : 0, std::move(resume));
  return true;
}

}  // namespace placementd
