#include "live/session.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placementd {

using nlohmann::json;

std::optional<double> CandidateRecord::median(int64_t warmup) const {
  if (step_times.size() <= static_cast<size_t>(std::max<int64_t>(warmup, 0))) return std::nullopt;
  std::vector<double> kept(step_times.begin() + warmup, step_times.end());
  const size_t mid = kept.size() / 2;
  std::nth_element(kept.begin(), kept.begin() + mid, kept.end());
  if (kept.size() % 2 == 1) return kept[mid];
  const double upper = kept[mid];
  std::nth_element(kept.begin(), kept.begin() + mid - 1, kept.end());
  return (kept[mid - 1] + upper) / 2.0;
}

const CandidateRecord* Session::best() const {
  // Once exploiting, the placement in force is the answer: its median rests on many more steps
  // than any candidate's, so a candidate measured a hair faster over a few steps does not unseat it.
  if (state == SessionState::kExploiting)
    if (auto it = candidates.find(current_candidate);
        it != candidates.end() && !it->second.stale && it->second.median(policy.exploration.warmup_steps))
      return &it->second;
  const CandidateRecord* best = nullptr;
  std::optional<double> best_time;
  for (const auto& [id, c] : candidates) {
    if (c.stale) continue;
    const auto m = c.median(policy.exploration.warmup_steps);
    if (m && (!best_time || *m < *best_time)) {
      best = &c;
      best_time = m;
    }
  }
  return best;
}

double Session::profiling_overhead_seconds() const {
  double extra = 0.0;
  for (const auto& [id, c] : candidates) {
    if (c.profiled_times.empty() || !(c.reason == Reason::kStart || c.reason == Reason::kCached)) continue;
    const std::optional<double> m = c.median(policy.exploration.warmup_steps);
    if (!m) continue;
    double total = 0.0;
    for (double t : c.profiled_times) total += t;
    extra += std::max(0.0, total - static_cast<double>(c.profiled_times.size()) * *m);
  }
  return extra;
}

std::set<std::string> Session::profiled_kinds() const {
  std::set<std::string> kinds;
  if (graph)
    for (const placement::Op& op : graph->ops)
      for (const auto& [kind, profile] : op.profile) kinds.insert(kind);
  return kinds;
}

json Session::summary() const {
  const int64_t warmup = policy.exploration.warmup_steps;
  const CandidateRecord* b = best();
  json start = nullptr;
  if (!candidates.empty())
    if (auto m = candidates.begin()->second.median(warmup)) start = *m;
  json best_time = nullptr;
  if (b) best_time = *b->median(warmup);
  json current = nullptr;
  if (auto it = candidates.find(current_candidate); it != candidates.end())
    if (auto m = it->second.median(warmup)) current = *m;
  // Time spent running exploration candidates, and profiling beyond the start's own step time, as
  // a fraction of measured step time (the start placement is what the job would have run anyway).
  const double profiling = profiling_overhead_seconds();
  const double overhead = measured_seconds > 0 ? (exploration_seconds + profiling) / measured_seconds : 0.0;
  json speedup = nullptr;
  if (!start.is_null() && !best_time.is_null() && best_time.get<double>() > 0)
    speedup = start.get<double>() / best_time.get<double>();
  // When the search first got within 2% of the best it has now (issue #5's convergence figure).
  json steps_to_2pct = nullptr, seconds_to_2pct = nullptr;
  if (b)
    for (const auto& [cid, c] : candidates) {
      const auto m = c.median(warmup);
      if (c.stale || !m || !c.measured_at_step || *m > 1.02 * best_time.get<double>()) continue;
      steps_to_2pct = *c.measured_at_step;
      seconds_to_2pct = *c.measured_at_s;
      break;
    }
  // How much of the exploration budget is spent: candidates against max_candidates, and steps
  // against max_overhead_fraction of the steps the job said it will run (or, without them, of the
  // time measured so far: the pace).
  const auto& e = policy.exploration;
  double budget_used = e.max_candidates > 0 ? static_cast<double>(candidates.size()) / e.max_candidates : 1.0;
  if (expected_steps > 0 && e.max_overhead_fraction > 0)
    budget_used = std::max(budget_used, exploration_steps / (e.max_overhead_fraction * expected_steps));
  if (expected_steps == 0 && e.max_overhead_fraction > 0 && measured_seconds > 0)
    budget_used = std::max(budget_used, exploration_seconds / (e.max_overhead_fraction * measured_seconds));
  if ((state == SessionState::kExploiting && !paused) || state == SessionState::kDetached) budget_used = 1.0;
  const auto end = detached_steady ? *detached_steady : std::chrono::steady_clock::now();
  const auto uptime = std::chrono::duration<double>(end - attached_steady).count();
  return {{"id", id},
          {"name", job},
          {"uid", uid},
          {"pid", pid},
          {"state", to_string(state)},
          {"fingerprint", fingerprint},
          {"ops", graph ? graph->ops.size() : 0},
          {"groups", pipeline ? pipeline->grouping().num_groups : 0},
          {"devices", devices.size()},
          {"grouper", policy.grouper},
          {"placer", policy.placer},
          {"algorithm", policy.algorithm},
          {"steps", steps},
          {"failed_steps", failed_steps},
          {"candidates_tried", candidates.size()},
          {"max_candidates", policy.exploration.max_candidates},
          {"start_step_time_s", start},
          {"current_step_time_s", current},
          {"best_step_time_s", best_time},
          {"exploration_overhead", overhead},
          {"exploration_steps", exploration_steps},
          {"expected_steps", expected_steps},
          {"budget_used", std::min(budget_used, 1.0)},
          {"paused", paused},
          {"speedup", speedup},
          {"steps_to_within_2pct", steps_to_2pct},
          {"seconds_to_within_2pct", seconds_to_2pct},
          {"rejected", rejected},
          {"repeats_scored", repeats_scored},
          {"reexplorations", reexplorations},
          {"profiled_kinds", profiled_kinds()},
          {"profiled_steps", profiled_steps},
          {"profiling_overhead_s", profiling},
          {"policy_error", policy_error.empty() ? json(nullptr) : json(policy_error)},
          {"attached_s", uptime}};
}

json Session::detail() const {
  json j = summary();
  json list = json::array();
  for (const auto& [id, c] : candidates) {
    const auto m = c.median(policy.exploration.warmup_steps);
    list.push_back({{"id", id},
                    {"reason", to_string(c.reason)},
                    {"stale", c.stale},
                    {"placement_fingerprint", c.placement.fingerprint()},
                    {"ops_per_device", c.placement.ops_per_device(devices.size())},
                    {"steps", c.step_times.size()},
                    {"failures", c.failures},
                    {"error", c.error.empty() ? json(nullptr) : json(c.error)},
                    {"median_step_time_s", m ? json(*m) : json(nullptr)}});
  }
  j["candidates"] = list;
  j["device_names"] = json::array();
  for (const auto& d : devices.devices) j["device_names"].push_back(d.name());
  j["stray_reports"] = stray_reports;
  j["profile_reports"] = profile_reports;
  j["rejected_by_device"] = rejected_by_device;
  j["warm_start"] = warm_start ? offline::to_json(*warm_start) : json(nullptr);
  return j;
}

}  // namespace placementd
