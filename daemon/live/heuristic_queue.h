#pragma once
// The heuristics' placements a session offers after the "simulator" warm start's answer (fastest on
// the planning model first, then the answer's swapped copies), each once, and what became of each,
// as inspection shows it (JobInfo's warm_start.heuristics): {placer, predicted_step_time_s,
// placement_fingerprint}, with `offered` once it was proposed, or {placer, not_offered} with why.
// Which placements these are is the session's (candidates.cpp); this keeps the queue and its book.

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/placement.h"

namespace placementd {

class HeuristicQueue {
 public:
  /// Why a queued placement cannot be proposed now, or nullopt when it can.
  using Refusal = std::function<std::optional<std::string>(const placement::Placement&)>;

  /// Empties the queue and its book (the session's graph is gone).
  void clear();
  /// `placer`'s placement is not offered, for `why`.
  void refuse(const std::string& placer, const std::string& why);
  /// Books a placement the planning model timed at `step_time_s`; returns its entry, which
  /// enqueue() takes.
  size_t predict(const std::string& placer, double step_time_s, const std::string& fingerprint);
  /// Queues `p`, booked at `entry`, behind those queued already.
  void enqueue(placement::Placement p, size_t entry);
  /// The placer booked at `entry`.
  std::string placer(size_t entry) const;
  /// The fingerprints of the placements still queued.
  std::set<std::string> queued() const;
  /// The next queued placement `refusal` has nothing against, booked as offered; each one refused
  /// on the way leaves the queue, booked with why. nullopt when none is left.
  std::optional<placement::Placement> next(const Refusal& refusal);
  bool empty() const { return queue_.empty(); }
  /// The book, one entry per placement considered, in the order they were.
  const nlohmann::json& report() const { return report_; }

 private:
  std::vector<std::pair<placement::Placement, size_t>> queue_;
  nlohmann::json report_ = nlohmann::json::array();
};

}  // namespace placementd
