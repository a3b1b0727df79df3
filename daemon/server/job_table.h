#pragma once
// The jobs the daemon serves: those attached now and the last few that ended, with who may see
// which.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "live/live_session.h"
#include "server/connection_state.h"

namespace placementd {

/// A job attached on some connection: its live session, and the strand its messages are handled
/// on (in the order they came, off the I/O thread).
struct AttachedJob {
  AttachedJob(uint64_t id, JobIdentity job, EffectivePolicy policy, const PluginRegistry& registry,
              Store& store, const boost::asio::thread_pool::executor_type& executor)
      : live(id, std::move(job), std::move(policy), registry, store), strand(executor) {}
  LiveSession live;
  boost::asio::strand<boost::asio::thread_pool::executor_type> strand;
};

class JobTable {
 public:
  /// Registers a new job under the next id; its messages will run on `executor`.
  std::shared_ptr<AttachedJob> add(JobIdentity job, EffectivePolicy policy,
                                   const PluginRegistry& registry, Store& store,
                                   const boost::asio::thread_pool::executor_type& executor);
  /// Moves an ended job to the recently finished ones.
  void finish(const std::shared_ptr<AttachedJob>& job);

  /// The jobs the peer may see: its own uid's, or all for an admin; with `finished`, the recently
  /// ended ones too (after the attached ones, oldest first).
  std::vector<std::shared_ptr<AttachedJob>> visible(const Peer& peer, bool finished = false) const;
  /// Every attached job.
  std::vector<std::shared_ptr<AttachedJob>> attached() const;
  size_t attached_count() const;

  /// How many ended jobs `placementctl jobs --finished` and `jobs show` can still see.
  static constexpr size_t kFinishedKept = 32;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<AttachedJob>> attached_;
  std::deque<std::shared_ptr<AttachedJob>> finished_;
  uint64_t next_id_ = 1;
};

}  // namespace placementd
