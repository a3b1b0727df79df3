#pragma once
// What one user's requests hold while they wait for a session or the policy pool: each request's
// decoded weight (protocol::weigh_payload), over all of that user's connections. Counting requests
// did not bound it: a 1 MiB step report of empty maps waits as ~94 MiB decoded, and 256 of them
// could wait per connection.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace placementd {

class UidBacklog {
 public:
  /// Whether a request weighing `bytes` may be decoded now under `cap`
  /// (daemon.max_pending_bytes_per_uid): when it fits beside what waits, or when nothing waits, so
  /// that a request larger than the cap still goes through, alone. Additions come from the I/O
  /// thread only, so the answer holds there until the request is added.
  bool admits(uint64_t bytes, uint64_t cap) const { return admits_at(bytes_.load(), bytes, cap); }
  /// A request handed to a strand or the policy pool, and the same request done (any thread).
  void add(uint64_t bytes) { bytes_.fetch_add(bytes); }
  void done(uint64_t bytes);
  /// Calls `resume` once, from done(), when a request weighing `bytes` is admitted; false, keeping
  /// nothing, when it is admitted already (the caller goes on at once).
  bool wait(uint64_t bytes, uint64_t cap, std::function<void()> resume);
  uint64_t bytes() const { return bytes_.load(); }

 private:
  static bool admits_at(uint64_t held, uint64_t bytes, uint64_t cap) {
    return held == 0 || (bytes <= cap && held <= cap - bytes);
  }

  std::atomic<uint64_t> bytes_{0};
  /// How many wait; done() takes the lock only when some do (it runs once per step report).
  std::atomic<size_t> waiters_{0};
  std::mutex mutex_;
  /// Each waiting connection's resume, with the most the backlog may hold for it to go on.
  std::vector<std::pair<uint64_t, std::function<void()>>> waiting_;
};

}  // namespace placementd
