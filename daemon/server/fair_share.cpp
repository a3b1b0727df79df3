#include "server/fair_share.h"

#include <algorithm>
#include <utility>

namespace placementd {

FairShare::FairShare(size_t slots, size_t per_user)
    : slots_(std::max<size_t>(1, slots)), per_user_(std::max<size_t>(1, per_user)) {}

void FairShare::submit(uid_t uid, const void* job, Start start) {
  std::vector<Start> starting;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    users_[uid].jobs[job].starts.push_back(std::move(start));
    ++waiting_;
    starting = take_turns();
  }
  for (Start& s : starting) s();
}

void FairShare::done(uid_t uid, const void* job) {
  std::vector<Start> starting;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    const auto u = users_.find(uid);
    if (u != users_.end()) {
      User& user = u->second;
      --user.running;
      const auto q = user.jobs.find(job);
      if (q != user.jobs.end()) {
        q->second.running = false;
        if (q->second.starts.empty()) user.jobs.erase(q);
      }
      if (user.jobs.empty() && user.running == 0) users_.erase(u);
    }
    starting = take_turns();
  }
  for (Start& s : starting) s();
}

bool FairShare::take_turn(User& user, Start& start) {
  if (user.running >= per_user_) return false;
  // The user's jobs in turn, from the one after the last served, around.
  auto first = user.jobs.upper_bound(user.last);
  for (size_t n = 0; n < user.jobs.size(); ++n, ++first) {
    if (first == user.jobs.end()) first = user.jobs.begin();
    Queue& q = first->second;
    // A job's requests run one at a time; those of no job (nullptr) side by side.
    if (q.starts.empty() || (q.running && first->first != nullptr)) continue;
    start = std::move(q.starts.front());
    q.starts.pop_front();
    q.running = true;
    user.last = first->first;
    ++user.running;
    // A queue of requests of no job is not kept for their running: one user's count is.
    if (first->first == nullptr && q.starts.empty()) user.jobs.erase(first);
    return true;
  }
  return false;
}

std::vector<FairShare::Start> FairShare::take_turns() {
  std::vector<Start> out;
  while (running_ < slots_ && waiting_ > 0) {
    bool took = false;
    // The users in turn, from the one after the last served, around.
    auto u = users_.upper_bound(last_uid_);
    for (size_t n = 0; n < users_.size() && !took; ++n, ++u) {
      if (u == users_.end()) u = users_.begin();
      Start start;
      if (take_turn(u->second, start)) {
        out.push_back(std::move(start));
        last_uid_ = u->first;
        ++running_;
        --waiting_;
        took = true;
      }
    }
    if (!took) break;  // what waits belongs to jobs that are running
  }
  return out;
}

size_t FairShare::waiting() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

size_t FairShare::running() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

}  // namespace placementd
