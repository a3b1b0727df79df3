#include "live/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placementd {

using nlohmann::json;

namespace {

std::string percent(double log_ratio) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", 100.0 * std::expm1(log_ratio));
  return buf;
}

}  // namespace

std::string describe(const TrialOutcome& t) {
  const char* verdict = t.verdict == TrialVerdict::kFaster      ? "faster than "
                        : t.verdict == TrialVerdict::kNotFaster ? "not faster than "
                        : t.verdict == TrialVerdict::kUnclear   ? "not shown faster than "
                                                                : "on trial against ";
  std::string out =
      verdict + std::string(t.final_check ? "the start " : "") + std::to_string(t.against);
  if (!t.note.empty())
    out += " (" + t.note + ")";
  else if (t.verdict == TrialVerdict::kUnclear)
    out += " (unclear at the cap or the budget's end)";
  if (t.log_ratio)
    out += ": " + percent(t.log_ratio->estimate) + " (" + percent(t.log_ratio->low) + " to " +
           percent(t.log_ratio->high) + ")";
  return out + ", " + std::to_string(t.pairs) + " pairs";
}

namespace {

// Appends `value`, keeping the latest kKeptSteps to 2 × kKeptSteps values.
void keep_latest(std::vector<double>& values, double value) {
  if (values.size() >= 2 * CandidateRecord::kKeptSteps)
    values.erase(values.begin(),
                 values.begin() + static_cast<std::ptrdiff_t>(CandidateRecord::kKeptSteps));
  values.push_back(value);
}

}  // namespace

void CandidateRecord::record(double step_time_s) {
  keep_latest(step_times, step_time_s);
  ++measured_steps;
}

void CandidateRecord::record_profiled(double step_time_s) {
  keep_latest(profiled_times, step_time_s);
}

std::optional<double> CandidateRecord::median() const { return median_of(step_times); }

std::optional<double> CandidateRecord::mean() const {
  if (step_times.empty()) return std::nullopt;
  double sum = 0.0;
  for (double t : step_times) sum += t;
  return sum / static_cast<double>(step_times.size());
}

std::optional<std::array<double, 2>> CandidateRecord::mean_interval() const {
  const size_t n = step_times.size();
  if (n < 6) return std::nullopt;
  const double m = *mean();
  double squares = 0.0;
  for (double t : step_times) squares += (t - m) * (t - m);
  const double half =
      1.96 * std::sqrt(squares / static_cast<double>(n - 1) / static_cast<double>(n));
  return std::array<double, 2>{m - half, m + half};
}

std::optional<double> median_of(std::vector<double> kept) {
  if (kept.empty()) return std::nullopt;
  const size_t mid = kept.size() / 2;
  std::nth_element(kept.begin(), kept.begin() + mid, kept.end());
  if (kept.size() % 2 == 1) return kept[mid];
  const double upper = kept[mid];
  std::nth_element(kept.begin(), kept.begin() + mid - 1, kept.end());
  return (kept[mid - 1] + upper) / 2.0;
}

std::optional<std::array<double, 2>> CandidateRecord::median_interval() const {
  std::vector<double> kept = step_times;
  const size_t n = kept.size();
  // [x(l), x(n+1-l)] (1-based, sorted) covers the median with probability 1 - 2 P(B <= l-1),
  // B ~ Binomial(n, 1/2): take the largest l that keeps that at 95% or more.
  constexpr double kAlpha = 0.05;
  double pmf = std::pow(0.5, static_cast<double>(n));  // P(B = 0)
  double tail = pmf;                                   // P(B <= l-1), for l = 1
  size_t l = 0;
  for (size_t k = 1; k <= n / 2 && 2.0 * tail <= kAlpha; ++k) {
    l = k;
    pmf *= static_cast<double>(n - k + 1) / static_cast<double>(k);  // P(B = k)
    tail += pmf;
  }
  if (l == 0) return std::nullopt;
  std::sort(kept.begin(), kept.end());
  return std::array<double, 2>{kept[l - 1], kept[n - l]};
}

const CandidateRecord* Session::best() const {
  const auto it = candidates.find(incumbent);
  if (it == candidates.end() || !it->second.median()) return nullptr;
  return &it->second;
}

const CandidateRecord* Session::start() const {
  return candidates.empty() ? nullptr : &candidates.begin()->second;
}

double Session::profiling_overhead_seconds() const {
  double extra = 0.0;
  for (const auto& [id, c] : candidates) {
    if (c.profiled_times.empty() || !(c.reason == Reason::kStart || c.reason == Reason::kCached))
      continue;
    const std::optional<double> m = c.median();
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

void Session::add_to_timeline(uint64_t placement, double step_time_s) {
  using placement::messages::TimelinePoint;
  TimelinePoint* last = timeline.empty() ? nullptr : &timeline.back();
  if (last && last->placement == placement && last->best == incumbent &&
      last->steps < timeline_stride) {
    ++last->steps;
    last->mean_step_time_s += (step_time_s - last->mean_step_time_s) / last->steps;
    return;
  }
  timeline.push_back({steps - 1, 1, placement, incumbent, step_time_s});
  if (timeline.size() <= TimelinePoint::kMaxPoints) return;
  // Halve the resolution: each pair of neighbours becomes one point of their steps.
  timeline_stride *= 2;
  std::vector<TimelinePoint> merged;
  merged.reserve(timeline.size() / 2 + 1);
  for (size_t i = 0; i < timeline.size(); i += 2) {
    if (i + 1 == timeline.size()) {
      merged.push_back(timeline[i]);
      break;
    }
    const TimelinePoint& a = timeline[i];
    const TimelinePoint& b = timeline[i + 1];
    TimelinePoint m = a;
    m.steps = a.steps + b.steps;
    m.mean_step_time_s = (a.mean_step_time_s * a.steps + b.mean_step_time_s * b.steps) /
                         static_cast<double>(m.steps);
    if (b.placement != a.placement) m.placement = 0;
    m.best = b.best;
    merged.push_back(m);
  }
  timeline = std::move(merged);
}

placement::messages::JobSummary Session::summary() const {
  const CandidateRecord* b = best();
  placement::messages::JobSummary out;
  if (!candidates.empty()) out.start_step_time_s = candidates.begin()->second.median();
  if (b) out.best_step_time_s = b->median();
  if (!candidates.empty())
    out.start_step_time_interval_s = candidates.begin()->second.median_interval();
  if (b) out.best_step_time_interval_s = b->median_interval();
  if (auto it = candidates.find(current_candidate); it != candidates.end())
    out.current_step_time_s = it->second.median();
  // What exploration cost beyond the placement in force's step time, and profiling beyond the
  // start's own, as a fraction of measured step time (0 when exploration earned more time back than
  // it cost: a challenger faster than the incumbent ran before a trial showed it).
  const double profiling = profiling_overhead_seconds();
  out.exploration_overhead =
      measured_seconds > 0 ? std::max(0.0, exploration_cost_s + profiling) / measured_seconds : 0.0;
  if (out.start_step_time_s && out.best_step_time_s && *out.best_step_time_s > 0)
    out.speedup = *out.start_step_time_s / *out.best_step_time_s;
  out.job_s = measured_seconds;
  // Against the start: what the job's batches would have taken had it stayed there. Times add up
  // as means do: a median below a skewed mean would show a job that never left the start as slower.
  const double batches = static_cast<double>(steps - failed_steps);
  if (const CandidateRecord* s = start(); s && s->mean() && measured_seconds > 0) {
    out.start_mean_step_time_s = s->mean();
    out.realized_speedup = *s->mean() * batches / measured_seconds;
    if (auto interval = s->mean_interval())
      out.realized_speedup_interval = std::array<double, 2>{
          (*interval)[0] * batches / measured_seconds, (*interval)[1] * batches / measured_seconds};
  }
  if (b) {
    const double best_mean = *b->mean();
    double beyond = 0.0;
    for (const auto& [cid, c] : candidates)
      if (cid != incumbent)
        beyond += c.seconds_run - static_cast<double>(c.steps_run - c.failures) * best_mean;
    out.beyond_best_s = beyond;
  }
  out.current_placement = current_candidate;
  if (b) out.best_placement = incumbent;
  out.on_best = b && current_candidate == incumbent;
  const SessionState ended = state == SessionState::kDetached ? state_at_detach : state;
  out.exploration_finished = ended == SessionState::kExploiting && !paused && finishing.empty();
  // When the search first got within 2% of the best it has now (issue #5's convergence figure).
  if (b)
    for (const auto& [cid, c] : candidates) {
      const auto m = c.median();
      if (c.stale || !m || !c.measured_at_step || *m > 1.02 * *out.best_step_time_s) continue;
      out.steps_to_within_2pct = *c.measured_at_step;
      out.seconds_to_within_2pct = *c.measured_at_s;
      break;
    }
  // How much of the exploration budget is spent: candidates against max_candidates, and the cost
  // against max_overhead_fraction of the time of the steps the job said it will run (or, without
  // them, of the time measured so far: the pace).
  const auto& e = policy.exploration;
  double budget_used =
      e.max_candidates > 0 ? static_cast<double>(candidates.size()) / e.max_candidates : 1.0;
  if (expected_steps > 0 && e.max_overhead_fraction > 0 && cost_reference)
    budget_used = std::max(budget_used, exploration_cost_s / (e.max_overhead_fraction *
                                                              expected_steps * *cost_reference));
  if (expected_steps == 0 && e.max_overhead_fraction > 0 && measured_seconds > 0)
    budget_used =
        std::max(budget_used, exploration_cost_s / (e.max_overhead_fraction * measured_seconds));
  if ((state == SessionState::kExploiting && !paused) || state == SessionState::kDetached)
    budget_used = 1.0;
  out.budget_used = std::min(budget_used, 1.0);
  const auto end = detached_steady ? *detached_steady : std::chrono::steady_clock::now();
  out.attached_s = std::chrono::duration<double>(end - attached_steady).count();
  out.id = id;
  out.name = job;
  out.uid = uid;
  out.pid = pid;
  out.state = state;
  out.fingerprint = fingerprint;
  out.ops = graph ? graph->ops.size() : 0;
  out.groups = pipeline ? pipeline->grouping().num_groups : 0;
  out.devices = devices.size();
  out.grouper = policy.grouper;
  out.placer = policy.placer;
  out.algorithm = policy.algorithm;
  out.steps = steps;
  out.failed_steps = failed_steps;
  out.candidates_tried = candidates.size();
  out.max_candidates = policy.exploration.max_candidates;
  out.exploration_steps = exploration_steps;
  out.expected_steps = expected_steps;
  out.paused = paused;
  out.rejected = rejected;
  out.repeats_scored = repeats_scored;
  out.reexplorations = reexplorations;
  const std::set<std::string> kinds = profiled_kinds();
  out.profiled_kinds.assign(kinds.begin(), kinds.end());
  out.profiled_steps = profiled_steps;
  out.profiling_overhead_s = profiling;
  if (!policy_error.empty()) out.policy_error = policy_error;
  out.replica = replica;
  if (follower()) {
    out.current_step_time_s = median_of({follower_step_times.begin(), follower_step_times.end()});
    // A follower explores nothing: rank 0's session spends the group's budget.
    out.grouper = out.placer = out.algorithm = "";
    out.max_candidates = 0;
    out.budget_used = 0;
  }
  return out;
}

placement::messages::JobInfo Session::detail() const {
  placement::messages::JobInfo info;
  info.job = summary();
  for (const auto& [cid, c] : candidates) {
    placement::messages::CandidateInfo ci;
    ci.id = cid;
    ci.reason = c.reason;
    ci.stale = c.stale;
    ci.placement_fingerprint = c.placement.fingerprint();
    for (auto n : c.placement.ops_per_device(devices.size())) ci.ops_per_device.push_back(n);
    ci.steps = c.measured_steps + c.warmup_steps;
    ci.failures = c.failures;
    if (!c.error.empty()) ci.error = c.error;
    ci.median_step_time_s = c.median();
    if (c.trial) ci.trial = describe(*c.trial);
    info.candidates.push_back(std::move(ci));
  }
  for (const auto& d : devices.devices) info.device_names.push_back(d.name());
  info.stray_reports = stray_reports;
  info.profile_reports = profile_reports;
  info.rejected_by_device = rejected_by_device;
  info.warm_start = warm_start ? offline::to_json(*warm_start) : nlohmann::json(nullptr);
  info.timeline = timeline;
  info.trials = trial_marks;
  return info;
}

}  // namespace placementd
