#pragma once
// The policy threads shared fairly between users. A request bound for a policy thread (a job's
// strand or the pool) waits here, queued by its user and its job, and at most `slots` run at once:
// a free slot goes to the next user in turn that has work waiting, and within a user to its next
// job in turn. One user's flood (two 50 000-op jobs sending profile reports as fast as they can)
// then waits behind its own work, not in front of another user's, whose request starts once one
// running request ends. And no user holds more than `per_user` slots ([daemon]
// policy_threads_per_uid; by default all but one), so the next user's request finds a slot free
// even while the first user's run for seconds each. A job has at most one request running (its
// strand runs them one at a time anyway), so no slot waits on a strand.

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace placementd {

class FairShare {
 public:
  /// Starts the request's work without running it (posts it to the strand or pool); it must call
  /// done() with the same uid and job once it has run.
  using Start = std::function<void()>;

  /// `slots` requests at once, at most `per_user` of them one user's (each at least 1).
  FairShare(size_t slots, size_t per_user);

  /// Queues a request of `uid` for `job` (nullptr: a request of no job, which may run beside
  /// another of its user's); starts it now if a slot is free and its turn has come.
  void submit(uid_t uid, const void* job, Start start);
  /// A request of `uid` for `job` has run: its slot goes to the next in turn.
  void done(uid_t uid, const void* job);

  /// Requests waiting for a slot, and those running.
  size_t waiting() const;
  size_t running() const;

 private:
  struct Queue {
    std::deque<Start> starts;
    bool running = false;
  };
  struct User {
    std::map<const void*, Queue> jobs;
    const void* last = nullptr;  // the job served last: the next turn goes to the one after it
    size_t running = 0;
  };
  // Under the lock: the requests whose turn has come, as far as slots are free.
  std::vector<Start> take_turns();
  bool take_turn(User& user, Start& start);

  const size_t slots_;
  const size_t per_user_;
  mutable std::mutex mutex_;
  std::map<uid_t, User> users_;
  uid_t last_uid_ = 0;
  size_t running_ = 0;
  size_t waiting_ = 0;
};

}  // namespace placementd
