#include "live/exploration.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

namespace placementd {

using placement::Placement;

namespace {

// Policy samples drawn per advance before giving up on finding one worth running: a converged
// policy keeps drawing placements it already measured, which is the signal to stop exploring.
constexpr int kSamplesPerAdvance = 64;
// A candidate must beat the best by this much to count as progress for convergence.
constexpr double kImprovement = 0.01;

bool exploring(SessionState s) { return s == SessionState::kExploring || s == SessionState::kReexploring; }

Directive issue(Session& s, Placement placement, Reason reason, std::optional<std::vector<int>> action) {
  CandidateRecord record;
  record.id = s.candidates.empty() ? 1 : s.candidates.rbegin()->first + 1;
  record.placement = std::move(placement);
  record.reason = reason;
  record.action = std::move(action);
  s.current_candidate = record.id;
  Directive d;
  d.placement_id = record.id;
  d.reason = record.reason;
  d.placement = record.placement;
  s.candidates[record.id] = std::move(record);
  return d;
}

// The measured candidate with this placement, if any (repeats are scored, not run again).
const CandidateRecord* measured(const Session& s, const std::string& fingerprint) {
  for (const auto& [id, c] : s.candidates)
    if (!c.stale && c.median(s.policy.exploration.warmup_steps) && c.placement.fingerprint() == fingerprint) return &c;
  return nullptr;
}

double reward_of(double step_time_s) { return -std::sqrt(step_time_s); }

// A job that did not say how many steps it will run gets its overhead budget as a pace: once the
// time on exploration candidates exceeds max_overhead_fraction of all measured time, exploration
// pauses on the best placement, and resumes when the job's own time has brought the fraction down
// to half of that. The overhead stays bounded whatever the job's length, and a long job keeps
// improving in bursts. The first few candidates always run: there is no best to fall back on yet.
constexpr size_t kCandidatesBeforePacing = 3;
constexpr double kResumeAtFractionOfBudget = 0.5;

bool over_pace(const Session& s) {
  const ExplorationConfig& e = s.policy.exploration;
  return s.expected_steps == 0 && s.candidates.size() >= kCandidatesBeforePacing &&
         s.exploration_seconds > e.max_overhead_fraction * s.measured_seconds;
}

bool may_resume(const Session& s) {
  return s.exploration_seconds <=
         kResumeAtFractionOfBudget * s.policy.exploration.max_overhead_fraction * s.measured_seconds;
}

// Why exploration should end now, or empty.
std::string exhausted(const Session& s) {
  const ExplorationConfig& e = s.policy.exploration;
  if (s.state == SessionState::kReexploring) return s.reexplore_left <= 0 ? "re-exploration budget spent" : "";
  if (static_cast<int64_t>(s.candidates.size()) >= e.max_candidates) return "max_candidates reached";
  if (s.expected_steps > 0 && s.exploration_steps >= e.max_overhead_fraction * static_cast<double>(s.expected_steps))
    return "max_overhead_fraction of the expected steps spent";
  if (e.converge_candidates > 0 && s.since_improvement >= e.converge_candidates)
    return "converged (" + std::to_string(s.since_improvement) + " candidates without a 1% gain)";
  if (!s.pipeline->policy() && s.candidates.size() >= 2) return "the placer is deterministic";
  return "";
}

Directive exploit(Session& s, const std::string& why) {
  const CandidateRecord* best = s.best();
  s.state = SessionState::kExploiting;
  s.drift_count = 0;
  s.current_candidate = best->id;
  spdlog::info("job {} '{}': exploiting placement {} ({:.6f} s/step, {} candidates): {}", s.id, s.job, best->id,
               *best->median(s.policy.exploration.warmup_steps), s.candidates.size(), why);
  Directive d;
  d.placement_id = best->id;
  d.reason = Reason::kBest;
  d.placement = best->placement;
  return d;
}

// Scores the candidate that just finished (or failed) and trains the policy on it.
void score(Session& s, CandidateRecord& c) {
  const ExplorationConfig& e = s.policy.exploration;
  std::optional<double> best_time;
  for (const auto& [id, other] : s.candidates)
    if (id != c.id && !other.stale)
      if (auto m = other.median(e.warmup_steps); m && (!best_time || *m < *best_time)) best_time = m;
  const std::optional<double> median = c.failures == 0 ? c.median(e.warmup_steps) : std::nullopt;
  c.measured_at_step = s.steps;
  c.measured_at_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.attached_steady).count();
  if (c.action) {
    if (median) s.algorithm->observe(*c.action, reward_of(*median), true);
    else s.algorithm->observe(*c.action, e.failing_reward, false);
  }
  if (median && (!best_time || *median < (1.0 - kImprovement) * *best_time)) s.since_improvement = 0;
  else ++s.since_improvement;
}

// Nothing ran well and nothing is left to try: back to the placement the job started on.
Directive fall_back(Session& s, const std::string& why) {
  spdlog::warn("job {} '{}': no candidate measured well ({}); keeping the start placement", s.id, s.job, why);
  s.state = SessionState::kExploiting;
  return issue(s, s.candidates.begin()->second.placement, Reason::kStart, std::nullopt);
}

}  // namespace

std::optional<Placement> single_device_candidate(const Session& s) {
  int device = 0;
  for (size_t d = 0; d < s.devices.size(); ++d)
    if (s.devices.devices[d].kind == placement::DeviceKind::kCuda) {
      device = static_cast<int>(d);
      break;
    }
  Placement p = Placement::single(*s.graph, device);
  p.enforce_pins(*s.graph, s.devices);
  const std::string fingerprint = p.fingerprint();
  for (const auto& [id, c] : s.candidates)
    if (c.placement.fingerprint() == fingerprint) return std::nullopt;
  if (!s.memory_model->check_memory(p).valid) return std::nullopt;
  return p;
}

std::string policy_key(const Session& s) {
  return s.policy.grouper + "+" + s.policy.placer + "+" + s.policy.algorithm;
}

Directive start_session(Session& s) {
  s.state = SessionState::kProfiling;
  if (s.cached) return issue(s, *s.cached, Reason::kCached, std::nullopt);
  Placement start = s.job_start ? *s.job_start : Placement::single(*s.graph, 0);
  start.enforce_pins(*s.graph, s.devices);
  return issue(s, std::move(start), Reason::kStart, std::nullopt);
}

bool record_report(Session& s, const placement::Measurement& m) {
  auto it = s.candidates.find(m.placement_id);
  if (it == s.candidates.end()) {
    ++s.stray_reports;
    return false;
  }
  CandidateRecord& c = it->second;
  ++s.steps;
  s.measured_seconds += m.step_time_s;
  // A profiled step is slower by its instrumentation: a step of the job, no measurement.
  if (m.profiled) {
    ++s.profiled_steps;
    c.profiled_times.push_back(m.step_time_s);
  } else if (m.ok) {
    c.step_times.push_back(m.step_time_s);
  } else {
    if (c.failures++ == 0) {
      c.error = m.error;
      spdlog::info("job {} '{}': a step failed under placement {} ({}): {}", s.id, s.job, c.id, to_string(c.reason),
                   m.error.empty() ? "no reason given" : m.error);
    }
    ++s.failed_steps;
  }
  if (exploring(s.state) && c.id == s.current_candidate && c.reason != Reason::kRemeasure) {
    ++s.exploration_steps;
    s.exploration_seconds += m.step_time_s;
  }
  // After a plugin failed, the placement in force stays: nothing is left to decide.
  if (s.advance_pending || c.id != s.current_candidate || !s.policy_error.empty()) return false;
  const ExplorationConfig& e = s.policy.exploration;
  bool due = false;
  if (s.state == SessionState::kExploiting) {
    const CandidateRecord* best = s.best();
    const auto best_time = best ? best->median(e.warmup_steps) : std::nullopt;
    if (m.ok && !m.profiled && best_time && m.step_time_s > *best_time * (1.0 + e.drift_threshold)) ++s.drift_count;
    else s.drift_count = 0;
    due = s.drift_count >= e.drift_steps;
    due = due || (s.paused && may_resume(s));
  } else if (s.state == SessionState::kProfiling || exploring(s.state)) {
    due = !m.ok || static_cast<int64_t>(c.step_times.size()) >= e.steps_per_candidate;
  }
  if (due) s.advance_pending = true;
  return due;
}

std::optional<Directive> advance_session(Session& s, Store& store) {
  s.advance_pending = false;
  const ExplorationConfig& e = s.policy.exploration;
  auto current = s.candidates.find(s.current_candidate);
  if (current == s.candidates.end()) return std::nullopt;

  const bool resuming = s.state == SessionState::kExploiting && s.paused && s.drift_count < e.drift_steps;
  if (resuming) {
    s.paused = false;
    s.state = SessionState::kExploring;
    spdlog::info("job {} '{}': exploration overhead down to {:.1f}% of the job's time; exploring again", s.id, s.job,
                 100.0 * s.exploration_seconds / s.measured_seconds);
  } else if (s.state == SessionState::kExploiting) {
    // Drift: what was measured before no longer describes this machine. Re-measure the best,
    // then let the (already trained) policy try a few placements around it.
    s.paused = false;
    for (auto& [id, c] : s.candidates) c.stale = true;
    s.state = SessionState::kReexploring;
    s.reexplore_left = std::max<int64_t>(3, e.max_candidates / 10);
    ++s.reexplorations;
    s.since_improvement = 0;
    spdlog::info("job {} '{}': step time drifted {}% above the best for {} steps; re-exploring", s.id, s.job,
                 static_cast<int>(e.drift_threshold * 100), e.drift_steps);
    return issue(s, current->second.placement, Reason::kRemeasure, std::nullopt);
  }

  if (!resuming) {  // the placement that ran was the best, already scored
    score(s, current->second);
    if (s.state == SessionState::kReexploring && current->second.reason != Reason::kRemeasure) --s.reexplore_left;
    if (s.state == SessionState::kProfiling) s.state = SessionState::kExploring;
    // The policy's state is written on progress and every 10 candidates (it can be megabytes).
    persist_best(s, store);
    if (s.since_improvement == 0 || s.candidates.size() % 10 == 0) persist_policy(s, store);

    const bool any_best = s.best() != nullptr;
    if (const std::string why = exhausted(s); !why.empty()) return any_best ? exploit(s, why) : fall_back(s, why);
    if (any_best && s.state == SessionState::kExploring && over_pace(s)) {
      s.paused = true;
      return exploit(s, "paused: exploration took " +
                            std::to_string(static_cast<int>(100.0 * s.exploration_seconds / s.measured_seconds)) +
                            "% of the job's time (max_overhead_fraction; the job gave no expected_steps)");
    }
  }
  if (!s.single_device_tried) {
    s.single_device_tried = true;
    if (std::optional<Placement> p = single_device_candidate(s)) return issue(s, std::move(*p), Reason::kSingleDevice, std::nullopt);
  }
  // A warm-started policy's first candidate is what it imitated, not a sample around it.
  if (!s.warm_start_tried && s.warm_start && s.warm_start->skipped.empty()) {
    s.warm_start_tried = true;
    if (!measured(s, s.warm_start->placement.fingerprint()) && s.memory_model->check_memory(s.warm_start->placement).valid)
      return issue(s, s.warm_start->placement, Reason::kWarmStart, s.warm_start->action);
  }

  for (int attempt = 0; attempt < kSamplesPerAdvance; ++attempt) {
    PolicyPipeline::Sample sample = s.pipeline->sample(s.rng);
    placement::Action action = std::move(sample.action);
    Placement p = std::move(sample.placement);
    const sim::SimulationResult memory = s.memory_model->check_memory(p);
    if (!memory.valid) {
      ++s.rejected;
      for (size_t d : memory.over_capacity()) ++s.rejected_by_device[s.devices.devices[d].name()];
      s.algorithm->observe(action, e.failing_reward, false);
      continue;
    }
    if (const CandidateRecord* known = measured(s, p.fingerprint())) {
      ++s.repeats_scored;
      s.algorithm->observe(action, reward_of(*known->median(e.warmup_steps)), true);
      if (!s.pipeline->policy()) break;  // a deterministic placer answers the same again
      continue;
    }
    return issue(s, std::move(p), s.state == SessionState::kReexploring ? Reason::kReexplore : Reason::kPolicy,
                 std::move(action));
  }
  const std::string why = "the policy only proposes placements already measured or rejected";
  return s.best() ? exploit(s, why) : fall_back(s, why);
}

std::optional<Directive> stop_exploring(Session& s, const std::string& why) {
  s.advance_pending = false;
  s.paused = false;
  if (s.candidates.empty()) return std::nullopt;  // not started: its start placement comes next
  const uint64_t before = s.current_candidate;
  if (s.best()) {
    Directive d = exploit(s, why);
    if (d.placement_id == before) return std::nullopt;
    return d;
  }
  const auto current = s.candidates.find(before);
  if (current != s.candidates.end() &&
      current->second.placement.fingerprint() == s.candidates.begin()->second.placement.fingerprint()) {
    s.state = SessionState::kExploiting;
    return std::nullopt;
  }
  return fall_back(s, why);
}

bool persist_best(Session& s, Store& store) {
  if (!s.graph) return false;
  try {
    if (const CandidateRecord* b = s.best())
      return store.offer(*s.graph, s.devices, {b->placement, *b->median(s.policy.exploration.warmup_steps), s.job});
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its best placement: {}", s.id, s.job, e.what());
  }
  return false;
}

void persist_policy(Session& s, Store& store) {
  // A policy that threw may be half-updated: the next run starts from the last state saved.
  const placement::TrainablePolicy* policy = s.pipeline ? s.pipeline->policy() : nullptr;
  if (!s.graph || !policy || !s.policy_error.empty()) return;
  std::string state = policy->save_state();  // plugin code: what it throws is the caller's
  try {
    store.save_policy_state(*s.graph, s.devices, policy_key(s), std::move(state));
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its policy state: {}", s.id, s.job, e.what());
  }
}

}  // namespace placementd
