#include "live/heuristic_queue.h"

namespace placementd {

void HeuristicQueue::clear() {
  queue_.clear();
  report_ = nlohmann::json::array();
}

void HeuristicQueue::refuse(const std::string& placer, const std::string& why) {
  report_.push_back({{"placer", placer}, {"not_offered", why}});
}

size_t HeuristicQueue::predict(const std::string& placer, double step_time_s,
                               const std::string& fingerprint) {
  report_.push_back({{"placer", placer},
                     {"predicted_step_time_s", step_time_s},
                     {"placement_fingerprint", fingerprint}});
  return report_.size() - 1;
}

void HeuristicQueue::enqueue(placement::Placement p, size_t entry) {
  queue_.emplace_back(std::move(p), entry);
}

std::string HeuristicQueue::placer(size_t entry) const {
  return report_.at(entry).at("placer").get<std::string>();
}

std::set<std::string> HeuristicQueue::queued() const {
  std::set<std::string> fingerprints;
  for (const auto& q : queue_) fingerprints.insert(q.first.fingerprint());
  return fingerprints;
}

std::optional<placement::Placement> HeuristicQueue::next(const Refusal& refusal) {
  while (!queue_.empty()) {
    auto [p, entry] = std::move(queue_.front());
    queue_.erase(queue_.begin());
    nlohmann::json& booked = report_[entry];
    if (std::optional<std::string> why = refusal(p)) {
      booked["not_offered"] = std::move(*why);
      continue;
    }
    booked["offered"] = true;
    return std::move(p);
  }
  return std::nullopt;
}

}  // namespace placementd
