#include "server/job_table.h"

namespace placementd {

std::shared_ptr<AttachedJob> JobTable::add(
    JobIdentity job, EffectivePolicy policy, const PluginRegistry& registry, Store& store,
    const boost::asio::thread_pool::executor_type& executor) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  auto attached = std::make_shared<AttachedJob>(id, std::move(job), std::move(policy), registry,
                                                store, executor);
  attached_[id] = attached;
  return attached;
}

void JobTable::finish(const std::shared_ptr<AttachedJob>& job) {
  // Kept for `placementctl jobs --finished`: the record, not the session's graph and plugins.
  job->live.retire();
  std::lock_guard<std::mutex> lock(mutex_);
  attached_.erase(job->live.id());
  finished_.push_back(job);
  if (finished_.size() > kFinishedKept) finished_.pop_front();
}

std::vector<std::shared_ptr<AttachedJob>> JobTable::visible(const Peer& peer, bool finished) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<AttachedJob>> out;
  for (const auto& [id, job] : attached_)
    if (peer.admin || job->live.uid() == peer.uid) out.push_back(job);
  if (finished)
    for (const auto& job : finished_)
      if (peer.admin || job->live.uid() == peer.uid) out.push_back(job);
  return out;
}

std::vector<std::shared_ptr<AttachedJob>> JobTable::attached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<AttachedJob>> out;
  for (const auto& [id, job] : attached_) out.push_back(job);
  return out;
}

size_t JobTable::attached_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return attached_.size();
}

}  // namespace placementd
