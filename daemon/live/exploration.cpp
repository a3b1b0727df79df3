#include "live/exploration.h"

#include "live/candidates.h"
#include "live/directive.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace placementd {

using placement::Placement;

namespace {

// A screened candidate goes on trial unless its median is slower than the incumbent's by more than
// this many standard errors of the difference: at 10 screening steps and 30% step-time noise a
// median is only good to ±12%, so "looked faster over ten steps" would drop a third of the real 5%
// gains, while a candidate 20% slower is mostly spared a trial.
constexpr double kScreenZ = 1.0;
// The standard error of a median of n normal samples is sqrt(pi/2) sigma / sqrt(n); sigma comes
// from the median absolute deviation (1.4826 MAD, robust to a spike).
constexpr double kMedianEfficiency = 1.2533;
constexpr double kMadToSigma = 1.4826;
// The final check may take this many times max_trial_steps: it decides for good whether the job
// keeps what the trials found, and an unclear end sends the job back to its start (at 30% noise
// and one cap, that cost 3% of the runs a real 5% gain; see docs/live.md).
constexpr int64_t kFinalCheckStepsFactor = 2;
// Steps (at least; drift_steps if more) whose median is the reference a drift is measured from.
constexpr int64_t kDriftBaselineSteps = 30;

bool exploring(SessionState s) {
  return s == SessionState::kExploring || s == SessionState::kReexploring;
}

// What the state machine decided the job runs next: a candidate and why. The public entry points
// turn it into a directive (directive.h).
struct Next {
  uint64_t placement_id = 0;
  Reason reason = Reason::kStart;
};

Next issue(Session& s, Placement placement, Reason reason, std::optional<std::vector<int>> action) {
  CandidateRecord record;
  record.id = s.candidates.empty() ? 1 : s.candidates.rbegin()->first + 1;
  record.placement = std::move(placement);
  record.reason = reason;
  record.action = std::move(action);
  s.current_candidate = record.id;
  s.warmup_left = s.policy.exploration.warmup_steps;
  s.screen_steps = 0;
  const Next next{record.id, record.reason};
  s.candidates[record.id] = std::move(record);
  return next;
}

// Whether the job may be left on `c` (and the store may offer it to the next run): it is the start,
// or it passed the final check against it.
bool checked(const Session& s, const CandidateRecord& c) {
  const CandidateRecord* start = s.start();
  const std::string fingerprint = c.placement.fingerprint();
  if (!start || fingerprint == start->placement.fingerprint()) return true;
  // A re-measurement after a drift is a new record of a placement that may have passed already.
  for (const auto& [id, other] : s.candidates)
    if (other.trial && other.trial->final_check && other.trial->verdict == TrialVerdict::kFaster &&
        other.placement.fingerprint() == fingerprint)
      return true;
  return false;
}

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
         s.exploration_cost_s > e.max_overhead_fraction * s.measured_seconds;
}

bool may_resume(const Session& s) {
  return s.exploration_cost_s <= kResumeAtFractionOfBudget *
                                     s.policy.exploration.max_overhead_fraction *
                                     s.measured_seconds;
}

// A job that said how long it runs: exploration may cost max_overhead_fraction of that many steps
// at the placement in force's step time.
bool budget_spent(const Session& s) {
  const ExplorationConfig& e = s.policy.exploration;
  return s.expected_steps > 0 && s.cost_reference &&
         s.exploration_cost_s >=
             e.max_overhead_fraction * static_cast<double>(s.expected_steps) * *s.cost_reference;
}

// Steps of the placement in force whose mean is exploration's reference: recent enough to follow
// the machine, enough that another tenant's spike moves it little.
constexpr size_t kCostReferenceSteps = 512;

void refresh_cost_reference(Session& s) {
  const CandidateRecord* b = s.best();
  if (!b || b->step_times.empty()) return;
  const size_t n = std::min(b->step_times.size(), kCostReferenceSteps);
  double sum = 0.0;
  for (auto it = b->step_times.end() - static_cast<std::ptrdiff_t>(n); it != b->step_times.end();
       ++it)
    sum += *it;
  s.cost_reference = sum / static_cast<double>(n);
}

// Why exploration should end now, or empty.
std::string exhausted(const Session& s) {
  const ExplorationConfig& e = s.policy.exploration;
  if (s.state == SessionState::kReexploring)
    return s.reexplore_left <= 0 ? "re-exploration budget spent" : "";
  if (static_cast<int64_t>(s.candidates.size()) >= e.max_candidates)
    return "max_candidates reached";
  if (budget_spent(s)) return "max_overhead_fraction of the expected steps' time spent";
  if (e.converge_candidates > 0 && s.since_improvement >= e.converge_candidates)
    return "converged (" + std::to_string(s.since_improvement) +
           " candidates in a row, none shown faster)";
  if (!s.pipeline->policy() && s.candidates.size() >= 2) return "the placer is deterministic";
  return "";
}

TrialPlan trial_plan(const ExplorationConfig& e) {
  TrialPlan plan;
  plan.window_steps = e.trial_window_steps;
  plan.max_steps = e.max_trial_steps;
  plan.confidence = e.confidence;
  plan.min_gain = e.min_gain;
  return plan;
}

// Runs candidate `id` (measured already) again; nullopt when it runs now. A swap's first steps are
// warm-up again: caches, allocators and the parameters' new homes settle.
std::optional<Next> move_to(Session& s, uint64_t id, Reason reason) {
  if (s.current_candidate == id) return std::nullopt;
  s.current_candidate = id;
  s.warmup_left = s.policy.exploration.warmup_steps;
  return Next{id, reason};
}

Next exploit(Session& s, const std::string& why) {
  const CandidateRecord* best = s.best();
  s.state = SessionState::kExploiting;
  s.drift_count = 0;
  s.drift_reference.reset();
  s.drift_baseline.clear();
  s.trial.reset();
  s.finishing.clear();
  spdlog::info("job {} '{}': exploiting placement {} ({:.6f} s/step, {} candidates): {}", s.id,
               s.job, best->id, *best->median(), s.candidates.size(), why);
  if (s.current_candidate != best->id) s.warmup_left = s.policy.exploration.warmup_steps;
  s.current_candidate = best->id;
  return {best->id, Reason::kBest};
}

// Scores the candidate whose screening just finished (or failed) and trains the policy on it.
void score(Session& s, CandidateRecord& c) {
  const ExplorationConfig& e = s.policy.exploration;
  const std::optional<double> median = c.failures == 0 ? c.median() : std::nullopt;
  c.measured_at_step = s.steps;
  c.measured_at_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.attached_steady).count();
  if (c.action) {
    if (median)
      s.algorithm->observe(*c.action, reward_of(*median), true);
    else
      s.algorithm->observe(*c.action, e.failing_reward, false);
  }
  // Progress is a trial won (advance_trial resets this), never a screening that looked good.
  ++s.since_improvement;
}

// The standard error of log(median) of a candidate's steps.
double log_median_error(const CandidateRecord& c) {
  std::vector<double> logs;
  for (double t : c.step_times) logs.push_back(std::log(t));
  const size_t n = logs.size();
  if (n < 2) return 0.0;
  const size_t mid = n / 2;
  std::nth_element(logs.begin(), logs.begin() + mid, logs.end());
  const double center = logs[mid];
  for (double& x : logs) x = std::abs(x - center);
  std::nth_element(logs.begin(), logs.begin() + mid, logs.end());
  return kMedianEfficiency * kMadToSigma * logs[mid] / std::sqrt(static_cast<double>(n));
}

// Whether a screened candidate goes on trial against the incumbent (see kScreenZ).
bool worth_a_trial(const Session& s, const CandidateRecord& c) {
  const CandidateRecord* incumbent = s.best();
  if (!incumbent || incumbent->id == c.id || c.failures > 0 || !c.median()) return false;
  if (c.placement.fingerprint() == incumbent->placement.fingerprint()) return false;
  const double gap = std::log(*c.median()) - std::log(*incumbent->median());
  const double a = log_median_error(c), b = log_median_error(*incumbent);
  return gap < kScreenZ * std::sqrt(a * a + b * b);
}

// Nothing ran well and nothing is left to try: back to the placement the job started on.
Next fall_back(Session& s, const std::string& why) {
  spdlog::warn("job {} '{}': no candidate measured well ({}); keeping the start placement", s.id,
               s.job, why);
  s.state = SessionState::kExploiting;
  s.trial.reset();
  s.finishing.clear();
  s.drift_reference.reset();
  s.drift_baseline.clear();
  const Next next = issue(s, s.candidates.begin()->second.placement, Reason::kStart, std::nullopt);
  s.incumbent = next.placement_id;
  return next;
}

void start_trial(Session& s, uint64_t incumbent, uint64_t challenger, bool final_check) {
  TrialPlan plan = trial_plan(s.policy.exploration);
  if (final_check) plan.max_steps *= kFinalCheckStepsFactor;
  s.trial.emplace(incumbent, challenger, plan, final_check);
  s.trial_failures = {s.candidates.at(incumbent).failures, s.candidates.at(challenger).failures};
}

// Exploration is over (`why`). The incumbent won the last of many trials: the winner of many
// comparisons is the likeliest to have won by luck (the winner's curse), so before the job is left
// on it, it goes through one more trial against the start, on fresh steps (the final check).
std::optional<Next> finish(Session& s, const std::string& why) {
  const CandidateRecord* best = s.best();
  const CandidateRecord* start = s.start();
  if (best->placement.fingerprint() == start->placement.fingerprint()) return exploit(s, why);
  spdlog::info("job {} '{}': {}; checking placement {} against the start ({}) before keeping it",
               s.id, s.job, why, best->id, start->id);
  s.finishing = why;
  start_trial(s, start->id, best->id, true);
  return move_to(s, s.trial->running(), Reason::kBest);
}

// Re-exploration has its own budget (a few candidates), not what first exploration spent.
bool trial_budget_spent(const Session& s) {
  return s.state == SessionState::kExploring && budget_spent(s);
}

std::optional<Next> next_candidate(Session& s);

// After a candidate's screening or trial: persist, then stop, pause or go on.
std::optional<Next> after_candidate(Session& s, Store& store) {
  // The policy's state is written on progress and every 10 candidates (it can be megabytes).
  persist_best(s, store);
  if (s.since_improvement == 0 || s.candidates.size() % 10 == 0) persist_policy(s, store);
  const bool any_best = s.best() != nullptr;
  if (const std::string why = exhausted(s); !why.empty()) {
    if (any_best) return finish(s, why);
    return fall_back(s, why);
  }
  if (any_best && s.state == SessionState::kExploring && over_pace(s)) {
    s.paused = true;
    return exploit(
        s, "paused: exploration took " +
               std::to_string(static_cast<int>(100.0 * s.exploration_cost_s / s.measured_seconds)) +
               "% of the job's time (max_overhead_fraction; the job gave no expected_steps)");
  }
  return next_candidate(s);
}

// A trial's window ended (or its challenger failed a step): look, then swap arms or decide.
std::optional<Next> advance_trial(Session& s, Store& store) {
  Trial& t = *s.trial;
  CandidateRecord& challenger = s.candidates.at(t.challenger());
  // A step that fails in a trial ends it: a failing challenger is not faster; a failing incumbent
  // (the start in a final check, say, that no longer fits) cannot stay in force.
  std::string note;
  TrialVerdict verdict = TrialVerdict::kUndecided;
  if (challenger.failures > s.trial_failures[1]) {
    verdict = TrialVerdict::kNotFaster;
    note = "it failed a step";
  } else if (s.candidates.at(t.incumbent()).failures > s.trial_failures[0]) {
    verdict = TrialVerdict::kFaster;
    note =
        std::string(t.final_check() ? "the start" : "placement " + std::to_string(t.incumbent())) +
        " failed a step";
  } else {
    verdict = t.close_window();
  }
  if (verdict == TrialVerdict::kUndecided && !t.final_check() && trial_budget_spent(s))
    verdict = TrialVerdict::kUnclear;
  if (verdict == TrialVerdict::kUndecided) {
    const uint64_t next = t.running();
    return move_to(s, next, next == s.incumbent ? Reason::kBest : s.candidates.at(next).reason);
  }
  challenger.trial =
      TrialOutcome{t.incumbent(), verdict, t.last_look(), t.pairs(), t.final_check(), note};
  s.trial_marks.push_back(
      {challenger.id, t.incumbent(), s.steps, to_string(verdict), t.final_check()});
  const auto& ratio = t.last_look();
  spdlog::info(
      "job {} '{}': placement {} {} than {} after {} pairs of windows ({})", s.id, s.job,
      challenger.id, to_string(verdict), t.incumbent(), t.pairs(),
      ratio ? fmt::format("{:+.1f}%, {:+.1f}% to {:+.1f}%", 100.0 * std::expm1(ratio->estimate),
                          100.0 * std::expm1(ratio->low), 100.0 * std::expm1(ratio->high))
            : std::string("no look yet"));
  const bool final_check = t.final_check();
  s.trial.reset();
  if (final_check) {
    const std::string why = s.finishing;
    if (verdict != TrialVerdict::kFaster) {
      s.incumbent = t.incumbent();
      return exploit(s, why + "; placement " + std::to_string(challenger.id) +
                            " was not shown faster than the start, which the job keeps");
    }
    return exploit(s, why);
  }
  if (verdict == TrialVerdict::kFaster) {
    s.incumbent = challenger.id;
    s.since_improvement = 0;
  }
  return after_candidate(s, store);
}

std::optional<Next> next_candidate(Session& s) {
  if (std::optional<Proposal> p = propose(s))
    return issue(s, std::move(p->placement), p->reason, std::move(p->action));
  const std::string why = "the policy only proposes placements already measured or rejected";
  if (s.best()) return finish(s, why);
  return fall_back(s, why);
}

}  // namespace

std::optional<std::string> short_job_notice(const ExplorationConfig& e, uint64_t expected_steps) {
  if (expected_steps == 0) return std::nullopt;
  // The fewest steps exploration runs when neither its budget nor a plugin failure ends it: the
  // start and then, if no candidate is ever faster, converge_candidates of them (max_candidates
  // without convergence), each for its warm-up and screening, before any trial or final check.
  const int64_t candidates = e.converge_candidates > 0
                                 ? std::min(e.converge_candidates, e.max_candidates)
                                 : e.max_candidates;
  const int64_t per_candidate = e.warmup_steps + e.steps_per_candidate;
  const uint64_t fewest = static_cast<uint64_t>((1 + std::max<int64_t>(candidates, 0)) *
                                                std::max<int64_t>(per_candidate, 1));
  if (expected_steps >= fewest) return std::nullopt;
  return "exploration takes at least " + std::to_string(fewest) + " steps to run its course (" +
         std::to_string(1 + candidates) + " placements × " + std::to_string(per_candidate) +
         " steps, before any trial) and the job expects " + std::to_string(expected_steps) +
         std::string(
             ": unless its budget (max_overhead_fraction) ends exploration sooner, the job "
             "ends while exploring, on the best placement a trial has shown faster by then");
}

std::string policy_key(const Session& s) {
  return s.policy.grouper + "+" + s.policy.placer + "+" + s.policy.algorithm;
}

Directive start_session(Session& s) {
  s.state = SessionState::kProfiling;
  Placement start = s.job_start ? *s.job_start : Placement::single(*s.graph, 0);
  start.enforce_pins(*s.graph, s.devices);
  const Next first = issue(s, std::move(start), Reason::kStart, std::nullopt);
  s.incumbent = first.placement_id;  // in force from the first step
  return make_directive(s, first.placement_id, first.reason);
}

bool record_report(Session& s, const placement::messages::StepReport& m) {
  auto it = s.candidates.find(m.placement_id);
  if (it == s.candidates.end()) {
    ++s.stray_reports;
    return false;
  }
  CandidateRecord& c = it->second;
  const bool current = c.id == s.current_candidate;
  ++s.steps;
  s.measured_seconds += m.step_time_s;
  ++c.steps_run;
  c.seconds_run += m.step_time_s;
  s.add_to_timeline(c.id, m.step_time_s);
  bool window_full = false;
  bool measured = false;  // a step of the placement in force, past its warm-up
  // A profiled step is slower by its instrumentation: a step of the job, no measurement.
  if (m.profiled) {
    ++s.profiled_steps;
    c.record_profiled(m.step_time_s);
  } else if (m.ok) {
    if (current) ++s.screen_steps;
    // The first steps after a swap are warm-up; a report in flight from before it is no such step.
    if (current && s.warmup_left > 0) {
      --s.warmup_left;
      ++c.warmup_steps;
    } else {
      c.record(m.step_time_s);
      measured = current;
      if (s.trial && current) window_full = s.trial->add(c.id, m.step_time_s);
    }
  } else {
    if (c.failures++ == 0) {
      c.error = m.error;
      spdlog::info("job {} '{}': a step failed under placement {} ({}): {}", s.id, s.job, c.id,
                   to_string(c.reason), m.error.empty() ? "no reason given" : m.error);
    }
    ++s.failed_steps;
  }
  // Steps off the placement in force while exploring: a candidate's screening, its trial windows,
  // and the start's windows in the final check. What they cost is their time beyond the placement
  // in force's; so does the warm-up of each swap back to it within a trial.
  if (exploring(s.state) && current && !m.profiled) {
    const bool off = c.id != s.incumbent && c.reason != Reason::kRemeasure;
    if (off) ++s.exploration_steps;
    if (off && !m.ok)
      s.exploration_cost_s += m.step_time_s;  // the job runs that batch again
    else if ((off || (s.trial && !measured)) && m.ok && s.cost_reference)
      s.exploration_cost_s += m.step_time_s - *s.cost_reference;
  }
  // After a plugin failed, the placement in force stays: nothing is left to decide.
  if (s.advance_due_after || !current || !s.policy_error.empty()) return false;
  const ExplorationConfig& e = s.policy.exploration;
  bool due = false;
  if (s.state == SessionState::kExploiting) {
    if (!s.drift_reference && measured) {
      s.drift_baseline.push_back(m.step_time_s);
      if (static_cast<int64_t>(s.drift_baseline.size()) >=
          std::max<int64_t>(e.drift_steps, kDriftBaselineSteps)) {
        s.drift_reference = median_of(std::move(s.drift_baseline));
        s.drift_baseline.clear();
      }
    }
    const std::optional<double> best_time = s.drift_reference;
    if (m.ok && !m.profiled && best_time && m.step_time_s > *best_time * (1.0 + e.drift_threshold))
      ++s.drift_count;
    else
      s.drift_count = 0;
    due = s.drift_count >= e.drift_steps;
    due = due || (s.paused && may_resume(s));
  } else if (s.trial) {
    due = window_full || (!m.ok && (c.id == s.trial->challenger() || c.id == s.trial->incumbent()));
  } else if (s.state == SessionState::kProfiling || exploring(s.state)) {
    due = !m.ok || s.screen_steps >= e.steps_per_candidate;
  }
  if (due) s.advance_due_after = m.step;
  return due;
}

namespace {

std::optional<Next> advance(Session& s, Store& store) {
  const ExplorationConfig& e = s.policy.exploration;
  auto current = s.candidates.find(s.current_candidate);
  if (current == s.candidates.end()) return std::nullopt;
  if (s.trial) return advance_trial(s, store);

  if (s.state == SessionState::kExploiting && s.paused && s.drift_count < e.drift_steps) {
    s.paused = false;
    s.state = SessionState::kExploring;
    spdlog::info(
        "job {} '{}': exploration overhead down to {:.1f}% of the job's time; exploring again",
        s.id, s.job, 100.0 * s.exploration_cost_s / s.measured_seconds);
    return next_candidate(s);
  }
  if (s.state == SessionState::kExploiting && s.reexplorations >= Session::kMaxReexplorations) {
    // A drift after this many: the placement in force stays, measured afresh from here on.
    s.drift_reference.reset();
    s.drift_baseline.clear();
    s.drift_count = 0;
    spdlog::info(
        "job {} '{}': step time drifted again; after {} re-explorations the job keeps its "
        "placement and "
        "measures its drift from here",
        s.id, s.job, s.reexplorations);
    return std::nullopt;
  }
  if (s.state == SessionState::kExploiting) {
    // Drift: what was measured before no longer describes this machine. Re-measure the best,
    // then let the (already trained) policy try a few placements around it.
    s.paused = false;
    for (auto& [id, c] : s.candidates) c.stale = true;
    s.state = SessionState::kReexploring;
    s.reexplore_left = std::max<int64_t>(3, e.max_candidates / 10);
    ++s.reexplorations;
    s.since_improvement = 0;
    spdlog::info("job {} '{}': step time drifted {}% above the best for {} steps; re-exploring",
                 s.id, s.job, static_cast<int>(e.drift_threshold * 100), e.drift_steps);
    return issue(s, current->second.placement, Reason::kRemeasure, std::nullopt);
  }

  // A screening finished (or failed).
  CandidateRecord& c = current->second;
  score(s, c);
  if (s.state == SessionState::kReexploring && c.reason != Reason::kRemeasure) --s.reexplore_left;
  if (s.state == SessionState::kProfiling) {
    s.state = SessionState::kExploring;
    s.incumbent = c.id;
    s.since_improvement = 0;  // the first measurement is progress: the policy state is saved
  } else if (c.reason == Reason::kRemeasure || (!s.best() && c.failures == 0 && c.median())) {
    // A re-measurement is the incumbent afresh; so is the first candidate that ran at all when the
    // start failed (nothing runs to compare it with; the final check still tries the start).
    s.incumbent = c.id;
  } else if (worth_a_trial(s, c)) {
    // The challenger runs now: its first window starts without a swap.
    start_trial(s, s.incumbent, c.id, false);
    return std::nullopt;
  }
  return after_candidate(s, store);
}

}  // namespace

namespace {

// What an advance or a stop ends with: the directive for `next` (naming the step that made the
// advance due), if the job moves; the advance is done either way.
std::optional<Directive> conclude(Session& s, const std::optional<Next>& next) {
  std::optional<Directive> d;
  if (next) d = make_directive(s, next->placement_id, next->reason);
  s.advance_due_after.reset();
  return d;
}

}  // namespace

std::optional<Directive> advance_session(Session& s, Store& store) {
  const std::optional<Next> next = advance(s, store);
  refresh_cost_reference(s);
  return conclude(s, next);
}

namespace {

std::optional<Next> stop(Session& s, const std::string& why) {
  s.paused = false;
  s.trial.reset();
  s.finishing.clear();
  if (s.candidates.empty()) return std::nullopt;  // not started: its start placement comes next
  const uint64_t before = s.current_candidate;
  // Without its final check, the winner of the trials is not kept: back to the start, if it ran.
  if (const CandidateRecord* b = s.best();
      b && !checked(s, *b) && s.start()->median() && s.start()->failures == 0)
    s.incumbent = s.start()->id;
  if (s.best()) {
    const Next next = exploit(s, why);
    if (next.placement_id == before) return std::nullopt;
    return next;
  }
  const auto current = s.candidates.find(before);
  if (current != s.candidates.end() && current->second.placement.fingerprint() ==
                                           s.candidates.begin()->second.placement.fingerprint()) {
    s.state = SessionState::kExploiting;
    s.incumbent = before;  // what it measures from now on is the best there is
    s.drift_reference = current->second.median();
    return std::nullopt;
  }
  return fall_back(s, why);
}

}  // namespace

std::optional<Directive> stop_exploring(Session& s, const std::string& why) {
  return conclude(s, stop(s, why));
}

bool persist_best(Session& s, Store& store) {
  if (!s.graph) return false;
  try {
    if (const CandidateRecord* b = s.best(); b && checked(s, *b))
      return store.offer(s.uid, *s.graph, s.devices, {b->placement, *b->median(), s.job});
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
    store.save_policy_state(s.uid, *s.graph, s.devices, policy_key(s), std::move(state));
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its policy state: {}", s.id, s.job, e.what());
  }
}

}  // namespace placementd
