#include "live/exploration.h"

#include "live/candidates.h"

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
// turn it into a directive (Session::directive, directive.cpp).
struct Next {
  uint64_t placement_id = 0;
  Reason reason = Reason::kStart;
};

}  // namespace

// The state machine's steps: Session's members below call them, and only they change its state.
struct Session::Machine {
  static Next issue(Session& s, Placement placement, Reason reason,
                    std::optional<std::vector<int>> action) {
    CandidateRecord record;
    record.id = s.candidates_.empty() ? 1 : s.candidates_.rbegin()->first + 1;
    record.placement = std::move(placement);
    record.reason = reason;
    record.action = std::move(action);
    s.current_candidate_ = record.id;
    s.warmup_left_ = s.policy_.exploration.warmup_steps;
    s.screen_steps_ = 0;
    const Next next{record.id, record.reason};
    s.candidates_[record.id] = std::move(record);
    return next;
  }

  // Whether the job may be left on `c` (and the store may offer it to the next run): it is the
  // start, or it passed the final check against it.
  static bool checked(const Session& s, const CandidateRecord& c) {
    const CandidateRecord* start = s.start_candidate();
    const std::string fingerprint = c.placement.fingerprint();
    if (!start || fingerprint == start->placement.fingerprint()) return true;
    // A re-measurement after a drift is a new record of a placement that may have passed already.
    for (const auto& [id, other] : s.candidates_)
      if (other.trial && other.trial->final_check &&
          other.trial->verdict == TrialVerdict::kFaster &&
          other.placement.fingerprint() == fingerprint)
        return true;
    return false;
  }

  // A job that did not say how many steps it will run gets its overhead budget as a pace: once the
  // time on exploration candidates exceeds max_overhead_fraction of all measured time, exploration
  // pauses on the best placement, and resumes when the job's own time has brought the fraction down
  // to half of that. The overhead stays bounded whatever the job's length, and a long job keeps
  // improving in bursts. The first few candidates always run: there is no best to fall back on yet.
  static constexpr size_t kCandidatesBeforePacing = 3;
  static constexpr double kResumeAtFractionOfBudget = 0.5;

  static bool over_pace(const Session& s) {
    const ExplorationConfig& e = s.policy_.exploration;
    return s.job_.expected_steps == 0 && s.candidates_.size() >= kCandidatesBeforePacing &&
           s.counters_.exploration_cost_s > e.max_overhead_fraction * s.counters_.measured_seconds;
  }

  static bool may_resume(const Session& s) {
    return s.counters_.exploration_cost_s <= kResumeAtFractionOfBudget *
                                                 s.policy_.exploration.max_overhead_fraction *
                                                 s.counters_.measured_seconds;
  }

  // A job that said how long it runs: exploration may cost max_overhead_fraction of that many steps
  // at the placement in force's step time.
  static bool budget_spent(const Session& s) {
    const ExplorationConfig& e = s.policy_.exploration;
    return s.job_.expected_steps > 0 && s.cost_reference_ &&
           s.counters_.exploration_cost_s >= e.max_overhead_fraction *
                                                 static_cast<double>(s.job_.expected_steps) *
                                                 *s.cost_reference_;
  }

  // Steps of the placement in force whose mean is exploration's reference: recent enough to follow
  // the machine, enough that another tenant's spike moves it little.
  static constexpr size_t kCostReferenceSteps = 512;

  static void refresh_cost_reference(Session& s) {
    const CandidateRecord* b = s.best();
    if (!b || b->step_times.empty()) return;
    const size_t n = std::min(b->step_times.size(), kCostReferenceSteps);
    double sum = 0.0;
    for (auto it = b->step_times.end() - static_cast<std::ptrdiff_t>(n); it != b->step_times.end();
         ++it)
      sum += *it;
    s.cost_reference_ = sum / static_cast<double>(n);
  }

  // Why exploration should end now, or empty.
  static std::string exhausted(const Session& s) {
    const ExplorationConfig& e = s.policy_.exploration;
    if (s.state_ == SessionState::kReexploring)
      return s.reexplore_left_ <= 0 ? "re-exploration budget spent" : "";
    if (static_cast<int64_t>(s.candidates_.size()) >= e.max_candidates)
      return "max_candidates reached";
    if (budget_spent(s)) return "max_overhead_fraction of the expected steps' time spent";
    if (e.converge_candidates > 0 && s.since_improvement_ >= e.converge_candidates)
      return "converged (" + std::to_string(s.since_improvement_) +
             " candidates in a row, none shown faster)";
    if (!s.pipeline_->policy() && s.candidates_.size() >= 2) return "the placer is deterministic";
    return "";
  }

  static TrialPlan trial_plan(const ExplorationConfig& e) {
    TrialPlan plan;
    plan.window_steps = e.trial_window_steps;
    plan.max_steps = e.max_trial_steps;
    plan.confidence = e.confidence;
    plan.min_gain = e.min_gain;
    return plan;
  }

  // Runs candidate `id` (measured already) again; nullopt when it runs now. A swap's first steps
  // are warm-up again: caches, allocators and the parameters' new homes settle.
  static std::optional<Next> move_to(Session& s, uint64_t id, Reason reason) {
    if (s.current_candidate_ == id) return std::nullopt;
    s.current_candidate_ = id;
    s.warmup_left_ = s.policy_.exploration.warmup_steps;
    return Next{id, reason};
  }

  static Next exploit(Session& s, const std::string& why) {
    const CandidateRecord* best = s.best();
    s.state_ = SessionState::kExploiting;
    s.drift_count_ = 0;
    s.drift_reference_.reset();
    s.drift_baseline_.clear();
    s.trial_.reset();
    s.finishing_.clear();
    spdlog::info("job {} '{}': exploiting placement {} ({:.6f} s/step, {} candidates): {}", s.id_,
                 s.job_.name, best->id, *best->median(), s.candidates_.size(), why);
    if (s.current_candidate_ != best->id) s.warmup_left_ = s.policy_.exploration.warmup_steps;
    s.current_candidate_ = best->id;
    return {best->id, Reason::kBest};
  }

  // Scores the candidate whose screening just finished (or failed) and trains the policy on it.
  static void score(Session& s, CandidateRecord& c) {
    const ExplorationConfig& e = s.policy_.exploration;
    const std::optional<double> median = c.failures == 0 ? c.median() : std::nullopt;
    c.measured_at_step = s.counters_.steps;
    c.measured_at_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - s.attached_steady_)
            .count();
    if (c.action) {
      if (median)
        s.algorithm_->observe(*c.action, reward_of(*median), true);
      else
        s.algorithm_->observe(*c.action, e.failing_reward, false);
    }
    // Progress is a trial won (advance_trial resets this), never a screening that looked good.
    ++s.since_improvement_;
  }

  // The standard error of log(median) of a candidate's steps.
  static double log_median_error(const CandidateRecord& c) {
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
  static bool worth_a_trial(const Session& s, const CandidateRecord& c) {
    const CandidateRecord* incumbent = s.best();
    if (!incumbent || incumbent->id == c.id || c.failures > 0 || !c.median()) return false;
    if (c.placement.fingerprint() == incumbent->placement.fingerprint()) return false;
    const double gap = std::log(*c.median()) - std::log(*incumbent->median());
    const double a = log_median_error(c), b = log_median_error(*incumbent);
    return gap < kScreenZ * std::sqrt(a * a + b * b);
  }

  // Nothing ran well and nothing is left to try: back to the placement the job started on.
  static Next fall_back(Session& s, const std::string& why) {
    spdlog::warn("job {} '{}': no candidate measured well ({}); keeping the start placement", s.id_,
                 s.job_.name, why);
    s.state_ = SessionState::kExploiting;
    s.trial_.reset();
    s.finishing_.clear();
    s.drift_reference_.reset();
    s.drift_baseline_.clear();
    const Next next =
        issue(s, s.candidates_.begin()->second.placement, Reason::kStart, std::nullopt);
    s.incumbent_ = next.placement_id;
    return next;
  }

  static void start_trial(Session& s, uint64_t incumbent, uint64_t challenger, bool final_check) {
    TrialPlan plan = trial_plan(s.policy_.exploration);
    if (final_check) plan.max_steps *= kFinalCheckStepsFactor;
    s.trial_.emplace(incumbent, challenger, plan, final_check);
    s.trial_failures_ = {s.candidates_.at(incumbent).failures,
                         s.candidates_.at(challenger).failures};
  }

  // Exploration is over (`why`). The incumbent won the last of many trials: the winner of many
  // comparisons is the likeliest to have won by luck (the winner's curse), so before the job is
  // left on it, it goes through one more trial against the start, on fresh steps (the final check).
  static std::optional<Next> finish(Session& s, const std::string& why) {
    const CandidateRecord* best = s.best();
    const CandidateRecord* start = s.start_candidate();
    if (best->placement.fingerprint() == start->placement.fingerprint()) return exploit(s, why);
    spdlog::info("job {} '{}': {}; checking placement {} against the start ({}) before keeping it",
                 s.id_, s.job_.name, why, best->id, start->id);
    s.finishing_ = why;
    start_trial(s, start->id, best->id, true);
    return move_to(s, s.trial_->running(), Reason::kBest);
  }

  // Re-exploration has its own budget (a few candidates), not what first exploration spent.
  static bool trial_budget_spent(const Session& s) {
    return s.state_ == SessionState::kExploring && budget_spent(s);
  }

  // After a candidate's screening or trial: persist, then stop, pause or go on.
  static std::optional<Next> after_candidate(Session& s, Store& store) {
    // The policy's state is written on progress and every 10 candidates (it can be megabytes).
    s.persist_best(store);
    if (s.since_improvement_ == 0 || s.candidates_.size() % 10 == 0) s.persist_policy(store);
    const bool any_best = s.best() != nullptr;
    if (const std::string why = exhausted(s); !why.empty()) {
      if (any_best) return finish(s, why);
      return fall_back(s, why);
    }
    if (any_best && s.state_ == SessionState::kExploring && over_pace(s)) {
      s.paused_ = true;
      return exploit(
          s, "paused: exploration took " +
                 std::to_string(static_cast<int>(100.0 * s.counters_.exploration_cost_s /
                                                 s.counters_.measured_seconds)) +
                 "% of the job's time (max_overhead_fraction; the job gave no expected_steps)");
    }
    return next_candidate(s);
  }

  // A trial's window ended (or its challenger failed a step): look, then swap arms or decide.
  static std::optional<Next> advance_trial(Session& s, Store& store) {
    Trial& t = *s.trial_;
    CandidateRecord& challenger = s.candidates_.at(t.challenger());
    // A step that fails in a trial ends it: a failing challenger is not faster; a failing incumbent
    // (the start in a final check, say, that no longer fits) cannot stay in force.
    std::string note;
    TrialVerdict verdict = TrialVerdict::kUndecided;
    if (challenger.failures > s.trial_failures_[1]) {
      verdict = TrialVerdict::kNotFaster;
      note = "it failed a step";
    } else if (s.candidates_.at(t.incumbent()).failures > s.trial_failures_[0]) {
      verdict = TrialVerdict::kFaster;
      note = std::string(t.final_check() ? "the start"
                                         : "placement " + std::to_string(t.incumbent())) +
             " failed a step";
    } else {
      verdict = t.close_window();
    }
    if (verdict == TrialVerdict::kUndecided && !t.final_check() && trial_budget_spent(s))
      verdict = TrialVerdict::kUnclear;
    if (verdict == TrialVerdict::kUndecided) {
      const uint64_t next = t.running();
      return move_to(s, next, next == s.incumbent_ ? Reason::kBest : s.candidates_.at(next).reason);
    }
    challenger.trial =
        TrialOutcome{t.incumbent(), verdict, t.last_look(), t.pairs(), t.final_check(), note};
    s.timeline_.mark(
        {challenger.id, t.incumbent(), s.counters_.steps, to_string(verdict), t.final_check()});
    const auto& ratio = t.last_look();
    spdlog::info(
        "job {} '{}': placement {} {} than {} after {} pairs of windows ({})", s.id_, s.job_.name,
        challenger.id, to_string(verdict), t.incumbent(), t.pairs(),
        ratio ? fmt::format("{:+.1f}%, {:+.1f}% to {:+.1f}%", 100.0 * std::expm1(ratio->estimate),
                            100.0 * std::expm1(ratio->low), 100.0 * std::expm1(ratio->high))
              : std::string("no look yet"));
    const bool final_check = t.final_check();
    s.trial_.reset();
    if (final_check) {
      const std::string why = s.finishing_;
      if (verdict != TrialVerdict::kFaster) {
        s.incumbent_ = t.incumbent();
        return exploit(s, why + "; placement " + std::to_string(challenger.id) +
                              " was not shown faster than the start, which the job keeps");
      }
      return exploit(s, why);
    }
    if (verdict == TrialVerdict::kFaster) {
      s.incumbent_ = challenger.id;
      s.since_improvement_ = 0;
    }
    return after_candidate(s, store);
  }

  static std::optional<Next> next_candidate(Session& s) {
    if (std::optional<Proposal> p = s.propose())
      return issue(s, std::move(p->placement), p->reason, std::move(p->action));
    const std::string why = "the policy only proposes placements already measured or rejected";
    if (s.best()) return finish(s, why);
    return fall_back(s, why);
  }

  static Directive start(Session& s) {
    s.state_ = SessionState::kProfiling;
    Placement start = s.job_start_ ? *s.job_start_ : Placement::single(*s.graph_, 0);
    start.enforce_pins(*s.graph_, s.job_.devices);
    const Next first = issue(s, std::move(start), Reason::kStart, std::nullopt);
    s.incumbent_ = first.placement_id;  // in force from the first step
    return s.directive(first.placement_id, first.reason);
  }

  static bool record(Session& s, const placement::messages::StepReport& m) {
    if (s.state_ == SessionState::kDetached) return false;
    if (s.follower()) {
      ++s.counters_.steps;
      s.counters_.measured_seconds += m.step_time_s;
      if (!m.ok) {
        ++s.counters_.failed_steps;
      } else if (!m.profiled) {
        s.follower_step_times_.push_back(m.step_time_s);
        if (s.follower_step_times_.size() > kFollowerWindow) s.follower_step_times_.pop_front();
      }
      return false;
    }
    auto it = s.candidates_.find(m.placement_id);
    if (it == s.candidates_.end()) {
      ++s.counters_.stray_reports;
      return false;
    }
    CandidateRecord& c = it->second;
    const bool current = c.id == s.current_candidate_;
    ++s.counters_.steps;
    s.counters_.measured_seconds += m.step_time_s;
    ++c.steps_run;
    c.seconds_run += m.step_time_s;
    s.timeline_.add(s.counters_.steps - 1, c.id, s.incumbent_, m.step_time_s);
    bool window_full = false;
    bool measured = false;  // a step of the placement in force, past its warm-up
    // A profiled step is slower by its instrumentation: a step of the job, no measurement.
    if (m.profiled) {
      ++s.counters_.profiled_steps;
      c.record_profiled(m.step_time_s);
    } else if (m.ok) {
      if (current) ++s.screen_steps_;
      // The first steps after a swap are warm-up; a report in flight from before it is no such
      // step.
      if (current && s.warmup_left_ > 0) {
        --s.warmup_left_;
        ++c.warmup_steps;
      } else {
        c.record(m.step_time_s);
        measured = current;
        if (s.trial_ && current) window_full = s.trial_->add(c.id, m.step_time_s);
      }
    } else {
      if (c.failures++ == 0) {
        c.error = m.error;
        spdlog::info("job {} '{}': a step failed under placement {} ({}): {}", s.id_, s.job_.name,
                     c.id, to_string(c.reason), m.error.empty() ? "no reason given" : m.error);
      }
      ++s.counters_.failed_steps;
    }
    // Steps off the placement in force while exploring: a candidate's screening, its trial windows,
    // and the start's windows in the final check. What they cost is their time beyond the placement
    // in force's; so does the warm-up of each swap back to it within a trial.
    if (exploring(s.state_) && current && !m.profiled) {
      const bool off = c.id != s.incumbent_ && c.reason != Reason::kRemeasure;
      if (off) ++s.counters_.exploration_steps;
      if (off && !m.ok)
        s.counters_.exploration_cost_s += m.step_time_s;  // the job runs that batch again
      else if ((off || (s.trial_ && !measured)) && m.ok && s.cost_reference_)
        s.counters_.exploration_cost_s += m.step_time_s - *s.cost_reference_;
    }
    // After a plugin failed, the placement in force stays: nothing is left to decide.
    if (s.advance_due_after_ || !current || !s.policy_error_.empty()) return false;
    const ExplorationConfig& e = s.policy_.exploration;
    bool due = false;
    if (s.state_ == SessionState::kExploiting) {
      if (!s.drift_reference_ && measured) {
        s.drift_baseline_.push_back(m.step_time_s);
        if (static_cast<int64_t>(s.drift_baseline_.size()) >=
            std::max<int64_t>(e.drift_steps, kDriftBaselineSteps)) {
          s.drift_reference_ = median_of(std::move(s.drift_baseline_));
          s.drift_baseline_.clear();
        }
      }
      const std::optional<double> best_time = s.drift_reference_;
      if (m.ok && !m.profiled && best_time &&
          m.step_time_s > *best_time * (1.0 + e.drift_threshold))
        ++s.drift_count_;
      else
        s.drift_count_ = 0;
      due = s.drift_count_ >= e.drift_steps;
      due = due || (s.paused_ && may_resume(s));
    } else if (s.trial_) {
      due = window_full ||
            (!m.ok && (c.id == s.trial_->challenger() || c.id == s.trial_->incumbent()));
    } else if (s.state_ == SessionState::kProfiling || exploring(s.state_)) {
      due = !m.ok || s.screen_steps_ >= e.steps_per_candidate;
    }
    if (due) s.advance_due_after_ = m.step;
    return due;
  }

  static std::optional<Next> advance(Session& s, Store& store) {
    const ExplorationConfig& e = s.policy_.exploration;
    auto current = s.candidates_.find(s.current_candidate_);
    if (current == s.candidates_.end()) return std::nullopt;
    if (s.trial_) return advance_trial(s, store);

    if (s.state_ == SessionState::kExploiting && s.paused_ && s.drift_count_ < e.drift_steps) {
      s.paused_ = false;
      s.state_ = SessionState::kExploring;
      spdlog::info(
          "job {} '{}': exploration overhead down to {:.1f}% of the job's time; exploring again",
          s.id_, s.job_.name,
          100.0 * s.counters_.exploration_cost_s / s.counters_.measured_seconds);
      return next_candidate(s);
    }
    if (s.state_ == SessionState::kExploiting &&
        s.counters_.reexplorations >= Session::kMaxReexplorations) {
      // A drift after this many: the placement in force stays, measured afresh from here on.
      s.drift_reference_.reset();
      s.drift_baseline_.clear();
      s.drift_count_ = 0;
      spdlog::info(
          "job {} '{}': step time drifted again; after {} re-explorations the job keeps its "
          "placement and "
          "measures its drift from here",
          s.id_, s.job_.name, s.counters_.reexplorations);
      return std::nullopt;
    }
    if (s.state_ == SessionState::kExploiting) {
      // Drift: what was measured before no longer describes this machine. Re-measure the best,
      // then let the (already trained) policy try a few placements around it.
      s.paused_ = false;
      for (auto& [id, c] : s.candidates_) c.stale = true;
      s.state_ = SessionState::kReexploring;
      s.reexplore_left_ = std::max<int64_t>(3, e.max_candidates / 10);
      ++s.counters_.reexplorations;
      s.since_improvement_ = 0;
      spdlog::info("job {} '{}': step time drifted {}% above the best for {} steps; re-exploring",
                   s.id_, s.job_.name, static_cast<int>(e.drift_threshold * 100), e.drift_steps);
      return issue(s, current->second.placement, Reason::kRemeasure, std::nullopt);
    }

    // A screening finished (or failed).
    CandidateRecord& c = current->second;
    score(s, c);
    if (s.state_ == SessionState::kReexploring && c.reason != Reason::kRemeasure)
      --s.reexplore_left_;
    if (s.state_ == SessionState::kProfiling) {
      s.state_ = SessionState::kExploring;
      s.incumbent_ = c.id;
      s.since_improvement_ = 0;  // the first measurement is progress: the policy state is saved
    } else if (c.reason == Reason::kRemeasure || (!s.best() && c.failures == 0 && c.median())) {
      // A re-measurement is the incumbent afresh; so is the first candidate that ran at all when
      // the start failed (nothing runs to compare it with; the final check still tries the start).
      s.incumbent_ = c.id;
    } else if (worth_a_trial(s, c)) {
      // The challenger runs now: its first window starts without a swap.
      start_trial(s, s.incumbent_, c.id, false);
      return std::nullopt;
    }
    return after_candidate(s, store);
  }

  // What an advance or a stop ends with: the directive for `next` (naming the step that made the
  // advance due), if the job moves; the advance is done either way.
  static std::optional<Directive> conclude(Session& s, const std::optional<Next>& next) {
    std::optional<Directive> d;
    if (next) d = s.directive(next->placement_id, next->reason);
    s.advance_due_after_.reset();
    return d;
  }

  static std::optional<Next> stop(Session& s, const std::string& why) {
    s.paused_ = false;
    s.trial_.reset();
    s.finishing_.clear();
    if (s.candidates_.empty()) return std::nullopt;  // not started: its start placement comes next
    const uint64_t before = s.current_candidate_;
    // Without its final check, the winner of the trials is not kept: back to the start, if it ran.
    if (const CandidateRecord* b = s.best();
        b && !checked(s, *b) && s.start_candidate()->median() && s.start_candidate()->failures == 0)
      s.incumbent_ = s.start_candidate()->id;
    if (s.best()) {
      const Next next = exploit(s, why);
      if (next.placement_id == before) return std::nullopt;
      return next;
    }
    const auto current = s.candidates_.find(before);
    if (current != s.candidates_.end() &&
        current->second.placement.fingerprint() ==
            s.candidates_.begin()->second.placement.fingerprint()) {
      s.state_ = SessionState::kExploiting;
      s.incumbent_ = before;  // what it measures from now on is the best there is
      s.drift_reference_ = current->second.median();
      return std::nullopt;
    }
    return fall_back(s, why);
  }
};

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

std::string Session::policy_key() const {
  return policy_.grouper + "+" + policy_.placer + "+" + policy_.algorithm;
}

Directive Session::start() { return Machine::start(*this); }

bool Session::record(const placement::messages::StepReport& report) {
  return Machine::record(*this, report);
}

std::optional<Directive> Session::advance(Store& store) {
  const std::optional<Next> next = Machine::advance(*this, store);
  Machine::refresh_cost_reference(*this);
  return Machine::conclude(*this, next);
}

std::optional<Directive> Session::stop_exploring(const std::string& why) {
  return Machine::conclude(*this, Machine::stop(*this, why));
}

std::optional<Directive> Session::policy_failed(std::string what) {
  policy_error_ = std::move(what);
  return stop_exploring(policy_error_);
}

bool Session::persist_best(Store& store) const {
  if (!graph_) return false;
  try {
    if (const CandidateRecord* b = best(); b && Machine::checked(*this, *b))
      return store.offer(job_.uid, *graph_, job_.devices, {b->placement, *b->median(), job_.name});
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its best placement: {}", id_, job_.name, e.what());
  }
  return false;
}

void Session::persist_policy(Store& store) const {
  // A policy that threw may be half-updated: the next run starts from the last state saved.
  const placement::TrainablePolicy* policy = pipeline_ ? pipeline_->policy() : nullptr;
  if (!graph_ || !policy || !policy_error_.empty()) return;
  std::string state = policy->save_state();  // plugin code: what it throws is the caller's
  try {
    store.save_policy_state(job_.uid, *graph_, job_.devices, policy_key(), std::move(state));
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its policy state: {}", id_, job_.name, e.what());
  }
}

}  // namespace placementd
