#include "live/exploration.h"

#include "live/candidates.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <tuple>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <boost/math/distributions/normal.hpp>

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
// Refinement gives a long trial to a candidate only if what was measured of it leaves at least
// this chance that it is faster than the best by refine_min_gain.
constexpr double kContenderChance = 0.1;
// A long trial gives up on its contender once an interval at this α rules out refine_min_gain:
// a screening trial's 0.1 ended long trials at their first look on a lucky run of the incumbent's,
// and with them the best placement the job had run (online_learning_bench, links: 72% of the gap
// recovered at 100 candidates with 0.1, 86% with 0.01; docs/benchmarks.md).
constexpr double kLongTrialFutilityAlpha = 0.01;
// The final check's futility α. Its challenger has won a trial already: giving it up throws away a
// gain found, so that takes stronger evidence than a screening trial's (at 30% noise, 0.1 there
// cost 3% of the runs a real 5% gain; see docs/live.md).
constexpr double kFinalCheckFutilityAlpha = 0.01;

bool exploring(SessionState state) {
  return state == SessionState::kExploring || state == SessionState::kReexploring;
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
  static Next issue(Session& session, Placement placement, Reason reason,
                    std::optional<std::vector<int>> action) {
    CandidateRecord record;
    record.id = session.candidates_.empty() ? 1 : session.candidates_.rbegin()->first + 1;
    // Until the policy plans where tensors live, a candidate keeps the residence the job started
    // on (a model that does not fit its GPU keeps its parameters on the host whatever op
    // placement is tried).
    if (placement.residence.is_default() && session.job_start_)
      placement.residence = session.job_start_->residence.carried_to(placement.device_of_op);
    record.placement = std::move(placement);
    record.reason = reason;
    record.action = std::move(action);
    session.current_candidate_ = record.id;
    session.warmup_left_ = session.policy_.exploration.warmup_steps;
    session.screen_steps_ = 0;
    const Next next{record.id, record.reason};
    session.candidates_[record.id] = std::move(record);
    return next;
  }

  // Whether the job may be left on `c` (and the store may offer it to the next run): it is the
  // start, or it passed the final check against it.
  static bool checked(const Session& session, const CandidateRecord& c) {
    const CandidateRecord* start = session.start_candidate();
    const std::string fingerprint = c.placement.fingerprint();
    if (!start || fingerprint == start->placement.fingerprint()) return true;
    // A re-measurement after a drift is a new record of a placement that may have passed already.
    return passed_against_the_start(session, fingerprint) != nullptr;
  }

  // The record of the placement `fingerprint` that passed the final check, or whose own trial
  // against the start stood for it; null if none did.
  static const CandidateRecord* passed_against_the_start(const Session& session,
                                                         const std::string& fingerprint) {
    for (const auto& [id, other] : session.candidates_)
      if (other.trial && (other.trial->final_check || other.trial->stands_for_final_check) &&
          other.trial->verdict == TrialVerdict::kFaster &&
          other.placement.fingerprint() == fingerprint)
        return &other;
    return nullptr;
  }

  // A job that did not say how many steps it will run gets its overhead budget as a pace: once the
  // time on exploration candidates exceeds max_overhead_fraction of all measured time, exploration
  // pauses on the best placement, and resumes when the job's own time has brought the fraction down
  // to half of that. The overhead stays bounded whatever the job's length, and a long job keeps
  // improving in bursts (ExplorationBudget).
  static bool over_pace(const Session& session) {
    return session.budget_.over_pace(session.candidates_.size(),
                                     session.counters_.exploration_cost_s,
                                     session.counters_.measured_seconds);
  }

  static bool may_resume(const Session& session) {
    return session.budget_.may_resume(session.counters_.exploration_cost_s,
                                      session.counters_.measured_seconds);
  }

  // A job that said how long it runs: exploration may cost max_overhead_fraction of that many steps
  // at the placement in force's step time.
  static bool budget_spent(const Session& session) {
    return session.budget_.spent(session.counters_.exploration_cost_s);
  }

  static void refresh_cost_reference(Session& session) {
    if (const CandidateRecord* b = session.best()) session.budget_.set_reference(b->step_times);
  }

  // Why exploration should end now, or empty.
  static std::string exhausted(const Session& session) {
    const ExplorationConfig& e = session.policy_.exploration;
    if (session.state_ == SessionState::kReexploring)
      return session.reexplore_left_ <= 0 ? "re-exploration budget spent" : "";
    if (static_cast<int64_t>(session.candidates_.size()) >= e.max_candidates)
      return "max_candidates reached";
    if (budget_spent(session)) return "max_overhead_fraction of the expected steps' time spent";
    if (e.converge_candidates > 0 && session.since_improvement_ >= e.converge_candidates)
      return "converged (" + std::to_string(session.since_improvement_) +
             " candidates in a row, none shown faster)";
    if (!session.pipeline_->policy() && session.candidates_.size() >= 2)
      return "the placer is deterministic";
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
  static std::optional<Next> move_to(Session& session, uint64_t id, Reason reason) {
    if (session.current_candidate_ == id) return std::nullopt;
    session.current_candidate_ = id;
    session.warmup_left_ = session.policy_.exploration.warmup_steps;
    return Next{id, reason};
  }

  // `why` by value: callers pass session.finishing_, which this clears.
  static Next exploit(Session& session, std::string why) {
    const CandidateRecord* best = session.best();
    session.state_ = SessionState::kExploiting;
    session.drift_.restart();
    session.trial_.reset();
    session.refinement_.set_running(false);
    session.finishing_.clear();
    spdlog::info("job {} '{}': exploiting placement {} ({:.6f} s/step, {} candidates): {}",
                 session.id_, session.job_.name(), best->id, *best->median(),
                 session.candidates_.size(), why);
    if (session.current_candidate_ != best->id)
      session.warmup_left_ = session.policy_.exploration.warmup_steps;
    session.current_candidate_ = best->id;
    return {best->id, Reason::kBest};
  }

  // Scores the candidate whose screening just finished (or failed) and trains the policy on it.
  static void score(Session& session, CandidateRecord& c) {
    const ExplorationConfig& e = session.policy_.exploration;
    const std::optional<double> median = c.failures == 0 ? c.median() : std::nullopt;
    c.measured_at_step = session.counters_.steps;
    c.measured_at_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - session.attached_steady_)
            .count();
    if (c.action) {
      if (median)
        session.algorithm_->observe(*c.action, reward_of(*median), true);
      else
        session.algorithm_->observe(*c.action, e.failing_reward, false);
    }
    // Progress is a trial won (advance_trial resets this), never a screening that looked good.
    ++session.since_improvement_;
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
  static bool worth_a_trial(const Session& session, const CandidateRecord& c) {
    const CandidateRecord* incumbent = session.best();
    if (!incumbent || incumbent->id == c.id || c.failures > 0 || !c.median()) return false;
    if (c.placement.fingerprint() == incumbent->placement.fingerprint()) return false;
    const auto [gap, error] = screening_log_ratio(c, *incumbent);
    return gap < kScreenZ * error;
  }

  // log(median of c / median of `against`) and its standard error; both have medians.
  static std::pair<double, double> screening_log_ratio(const CandidateRecord& c,
                                                       const CandidateRecord& against) {
    const double a = log_median_error(c), b = log_median_error(against);
    return {std::log(*c.median()) - std::log(*against.median()), std::sqrt(a * a + b * b)};
  }

  // Nothing ran well and nothing is left to try: back to the placement the job started on.
  static Next fall_back(Session& session, const std::string& why) {
    spdlog::warn("job {} '{}': no candidate measured well ({}); keeping the start placement",
                 session.id_, session.job_.name(), why);
    session.state_ = SessionState::kExploiting;
    session.trial_.reset();
    session.refinement_.set_running(false);
    session.finishing_.clear();
    session.drift_.restart();
    const Next next =
        issue(session, session.candidates_.begin()->second.placement, Reason::kStart, std::nullopt);
    session.incumbent_ = next.placement_id;
    return next;
  }

  static void start_trial(Session& session, uint64_t incumbent, uint64_t challenger,
                          bool final_check) {
    const ExplorationConfig& e = session.policy_.exploration;
    TrialPlan plan = trial_plan(e);
    if (final_check) plan.max_steps *= kFinalCheckStepsFactor;
    // The final check decides for good: where the job can afford refinement's long trials, a gain
    // smaller than min_gain (one refinement found, or one an ordinary trial showed with a little
    // luck) gets as long a check instead of being given up as "not faster by min_gain".
    if (final_check && session.refinement_.applied()) {
      const double steps = session.refinement_.long_trial_cap(session.counters_.steps, 0.0);
      if (steps > static_cast<double>(plan.max_steps))
        plan = refine_plan(e, static_cast<int64_t>(steps));
    }
    if (final_check) plan.futility_alpha = kFinalCheckFutilityAlpha;
    session.trial_.emplace(incumbent, challenger, plan, final_check);
    session.trial_failures_ = {session.candidates_.at(incumbent).failures,
                               session.candidates_.at(challenger).failures};
  }

  // What the measurements say of log(c / best): its trial's estimate, moved to the best by the
  // two medians when it was tried against an earlier incumbent, or its screening's gap; and the
  // standard error of that (the trial's interval is ±z(1 - α) of it at its α per look). nullopt
  // when c has neither.
  static std::optional<std::pair<double, double>> measured_log_ratio(const Session& session,
                                                                     const CandidateRecord& c,
                                                                     const CandidateRecord& best) {
    const std::optional<double> best_median = best.median();
    if (!best_median) return std::nullopt;
    if (c.trial && c.trial->log_ratio) {
      const ShiftInterval& r = *c.trial->log_ratio;
      const double z = boost::math::quantile(boost::math::complement(
          boost::math::normal(), trial_plan(session.policy_.exploration).alpha_per_look()));
      double estimate = r.estimate;
      if (c.trial->against != best.id)
        if (const auto at = session.candidates_.find(c.trial->against);
            at != session.candidates_.end() && at->second.median())
          estimate += std::log(*at->second.median()) - std::log(*best_median);
      return std::make_pair(estimate, std::max((r.high - r.low) / (2 * z), 1e-6));
    }
    if (!c.median()) return std::nullopt;
    const auto [gap, error] = screening_log_ratio(c, best);
    return std::make_pair(gap, std::max(error, 1e-6));
  }

  // Refinement's contenders: the candidates likeliest to be faster than the best by
  // refine_min_gain, by what was measured of them (a trial sized for min_gain leaves a 1% gain
  // "unclear", or "not faster by min_gain", at 20% step noise, with an estimate whose sign is a
  // coin's), each placement once, those with at least kContenderChance of it. Not the refitted
  // planning model's ranking: it was fitted to these very measurements and repeats their noise.
  static std::vector<std::pair<uint64_t, double>> contenders(const Session& session) {
    const CandidateRecord* best = session.best();
    if (!best) return {};
    const double needed = -std::log1p(session.policy_.exploration.refine_min_gain);
    const double most_z =
        boost::math::quantile(boost::math::complement(boost::math::normal(), kContenderChance));
    // (z of the gain not being there, estimate, id): the smallest z is the likeliest gain.
    std::vector<std::tuple<double, double, uint64_t>> found;
    for (const auto& [id, c] : session.candidates_) {
      if (c.stale || c.failures > 0 || !c.measured_at_step) continue;
      // A final check or a long trial already said what a long trial would.
      if (c.trial && (c.trial->final_check || c.trial->refinement)) continue;
      if (c.trial && c.trial->verdict == TrialVerdict::kFaster) continue;
      if (c.placement.fingerprint() == best->placement.fingerprint()) continue;
      const auto measured = measured_log_ratio(session, c, *best);
      if (!measured) continue;
      const double z = (measured->first - needed) / measured->second;
      if (z < most_z) found.emplace_back(z, measured->first, id);
    }
    std::sort(found.begin(), found.end());
    std::vector<std::pair<uint64_t, double>> out;
    std::set<std::string> seen;
    for (const auto& [z, estimate, id] : found) {
      if (static_cast<int64_t>(out.size()) >= session.policy_.exploration.refine_contenders) break;
      if (seen.insert(session.candidates_.at(id).placement.fingerprint()).second)
        out.emplace_back(id, estimate);
    }
    return out;
  }

  // The steps of the next contender's long trial (Refinement::share), no trial shorter than an
  // ordinary final check.
  static int64_t refine_share(const Session& session) {
    return session.refinement_.share(
        session.counters_.steps,
        kFinalCheckStepsFactor * session.policy_.exploration.max_trial_steps);
  }

  // A long trial's plan within `steps` of the job: windows widened so its pairs stay within
  // kMaxTrialPairs, each window's warm-up (not measured) counted among the steps, giving up on the
  // smaller of the two gains (a min_gain set below refine_min_gain is kept).
  static TrialPlan refine_plan(const ExplorationConfig& e, int64_t steps) {
    TrialPlan plan = trial_plan(e);
    plan.window_steps = std::max<int64_t>(e.trial_window_steps,
                                          (steps + 2 * kMaxTrialPairs - 1) / (2 * kMaxTrialPairs));
    const int64_t warmup = std::max<int64_t>(e.warmup_steps, 0);
    plan.max_steps =
        static_cast<int64_t>(static_cast<double>(steps) * static_cast<double>(plan.window_steps) /
                             static_cast<double>(plan.window_steps + warmup));
    plan.min_gain = std::min(e.min_gain, e.refine_min_gain);
    plan.futility_alpha = kLongTrialFutilityAlpha;
    return plan;
  }

  // Starts the next contender's long trial against the incumbent, if refinement has one and the
  // steps for it, and sets `next` to the swap it needs (none when the contender runs now); false
  // when refinement is over (or never applied).
  static bool refine(Session& session, std::optional<Next>& next) {
    const ExplorationConfig& e = session.policy_.exploration;
    if (!session.refinement_.began()) {
      const bool applies = session.state_ == SessionState::kExploring &&
                           session.job_.attach.expected_steps != 0 && e.refine_contenders > 0 &&
                           !budget_spent(session);
      session.refinement_.begin(
          applies, applies ? contenders(session) : std::vector<Refinement::Contender>{},
          session.counters_.steps);
      if (!applies) return false;
    }
    while (const std::optional<Refinement::Contender> contender =
               session.refinement_.next_contender()) {
      const auto [id, estimate] = *contender;
      const int64_t steps = refine_share(session);
      if (steps == 0 || budget_spent(session)) break;
      const CandidateRecord& c = session.candidates_.at(id);
      if (c.stale || c.placement.fingerprint() == session.best()->placement.fingerprint()) continue;
      spdlog::info(
          "job {} '{}': refining: placement {} ({:+.1f}% as measured) against {} for up to {} "
          "steps",
          session.id_, session.job_.name(), id, 100.0 * std::expm1(estimate), session.incumbent_,
          steps);
      session.trial_.emplace(session.incumbent_, id, refine_plan(e, steps), false);
      session.trial_failures_ = {session.candidates_.at(session.incumbent_).failures, c.failures};
      session.refinement_.set_running(true);
      next = move_to(session, session.trial_->running(), c.reason);
      return true;
    }
    session.refinement_.end();
    return false;
  }

  // Exploration is over (`why`). The incumbent won the last of many trials: the winner of many
  // comparisons is the likeliest to have won by luck (the winner's curse), so before the job is
  // left on it, it goes through one more trial against the start, on fresh steps (the final check).
  static std::optional<Next> finish(Session& session, const std::string& why) {
    session.finishing_ = why;  // each of refinement's long trials comes back here with it
    if (std::optional<Next> next; refine(session, next)) return next;
    const CandidateRecord* best = session.best();
    const CandidateRecord* start = session.start_candidate();
    if (best->placement.fingerprint() == start->placement.fingerprint())
      return exploit(session, why);
    if (const size_t held = trials_held(session); beat_the_start_for_good(session, *best, held)) {
      CandidateRecord& kept = session.candidates_.at(best->id);
      kept.trial->stands_for_final_check = true;
      return exploit(session, why + "; placement " + std::to_string(kept.id) +
                                  " beat the start itself in its trial, by evidence that holds "
                                  "across all " +
                                  std::to_string(held) + " trials: no final check repeats it");
    }
    // A drift's re-measurement of a placement that passed against the start before: its win was
    // no winner's curse, and repeating the check costs the start's slow steps. Only where the
    // placement now runs slower than when it won may the drift have made the start the faster.
    if (const CandidateRecord* passed =
            passed_against_the_start(session, best->placement.fingerprint());
        passed && passed->id != best->id && best->median() && passed->median() &&
        *best->median() <= *passed->median())
      return exploit(
          session,
          fmt::format("{}; placement {} is placement {} measured afresh, no slower than "
                      "when it beat the start ({:.3g} against {:.3g} ms a step): no "
                      "final check repeats it",
                      why, best->id, passed->id, 1e3 * *best->median(), 1e3 * *passed->median()));
    spdlog::info("job {} '{}': {}; checking placement {} against the start ({}) before keeping it",
                 session.id_, session.job_.name(), why, best->id, start->id);
    start_trial(session, start->id, best->id, true);
    return move_to(session, session.trial_->running(), Reason::kBest);
  }

  // Every trial that ended, a candidate's short and long one both (the timeline marks each).
  static size_t trials_held(const Session& session) {
    size_t held = 0;
    for (const auto& m : session.timeline_.marks())
      if (!m.final_check) ++held;
    return held;
  }

  // The final check guards against a winner of many trials that won one by luck; when `best` won
  // its own trial against the start, and that trial's evidence clears the trials' confidence with
  // a Bonferroni share for every trial held (any of them could have been the lucky one), the
  // final check would only repeat that comparison on fresh steps, which are the start's slowest.
  static bool beat_the_start_for_good(const Session& session, const CandidateRecord& best,
                                      size_t trials_held) {
    const CandidateRecord* start = session.start_candidate();
    if (!start || !best.trial || best.trial->final_check || best.trial->against != start->id ||
        best.trial->verdict != TrialVerdict::kFaster || !best.trial->note.empty())
      return false;
    return best.trial->p_faster * static_cast<double>(trials_held) <=
           1.0 - session.policy_.exploration.confidence;
  }

  // Re-exploration has its own budget (a few candidates), not what first exploration spent.
  static bool trial_budget_spent(const Session& session) {
    return session.state_ == SessionState::kExploring && budget_spent(session);
  }

  // After a candidate's screening or trial: persist, then stop, pause or go on.
  static std::optional<Next> after_candidate(Session& session, Store& store) {
    // The policy's state is written on progress and every 10 candidates (it can be megabytes).
    session.persist_best(store);
    if (session.since_improvement_ == 0 || session.candidates_.size() % 10 == 0)
      session.persist_policy(store);
    const bool any_best = session.best() != nullptr;
    if (const std::string why = exhausted(session); !why.empty()) {
      if (any_best) return finish(session, why);
      return fall_back(session, why);
    }
    if (any_best && session.state_ == SessionState::kExploring && over_pace(session)) {
      session.paused_ = true;
      return exploit(
          session,
          "paused: exploration took " +
              std::to_string(static_cast<int>(100.0 * session.counters_.exploration_cost_s /
                                              session.counters_.measured_seconds)) +
              "% of the job's time (max_overhead_fraction; the job gave no expected_steps)");
    }
    return next_candidate(session);
  }

  // A trial's window ended (or its challenger failed a step): look, then swap arms or decide.
  static std::optional<Next> advance_trial(Session& session, Store& store) {
    Trial& t = *session.trial_;
    CandidateRecord& challenger = session.candidates_.at(t.challenger());
    // A step that fails in a trial ends it: a failing challenger is not faster; a failing incumbent
    // (the start in a final check, say, that no longer fits) cannot stay in force.
    std::string note;
    TrialVerdict verdict = TrialVerdict::kUndecided;
    if (challenger.failures > session.trial_failures_[1]) {
      verdict = TrialVerdict::kNotFaster;
      note = "it failed a step";
    } else if (session.candidates_.at(t.incumbent()).failures > session.trial_failures_[0]) {
      verdict = TrialVerdict::kFaster;
      note = std::string(t.final_check() ? "the start"
                                         : "placement " + std::to_string(t.incumbent())) +
             " failed a step";
    } else {
      verdict = t.close_window();
    }
    if (verdict == TrialVerdict::kUndecided && !t.final_check() && trial_budget_spent(session))
      verdict = TrialVerdict::kUnclear;
    // Refinement's contenders are near-equals of the incumbent that a trial sized for min_gain
    // could not tell apart: one its long trial still cannot tell is kept or taken by the
    // estimate's side, which costs the job at most what the trial could not resolve (and the
    // final check still holds the job's choice to the start at the trials' confidence).
    if (verdict == TrialVerdict::kUnclear && session.refinement_.running() && note.empty())
      verdict = t.by_estimate();
    if (verdict == TrialVerdict::kUndecided) {
      const uint64_t next = t.running();
      return move_to(
          session, next,
          next == session.incumbent_ ? Reason::kBest : session.candidates_.at(next).reason);
    }
    // The p-value only a win can use (beat_the_start_for_good), and costs O(pairs³) to compute.
    const double p_faster = verdict == TrialVerdict::kFaster && note.empty() ? t.p_faster() : 1.0;
    challenger.trial = TrialOutcome{t.incumbent(), verdict,         t.last_look(),
                                    t.pairs(),     t.final_check(), session.refinement_.running(),
                                    note,          p_faster};
    session.timeline_.mark({challenger.id, t.incumbent(), session.counters_.steps,
                            to_string(verdict), t.final_check()});
    const auto& ratio = t.last_look();
    spdlog::info(
        "job {} '{}': placement {} {} than {} after {} pairs of {}-step windows ({})", session.id_,
        session.job_.name(), challenger.id, to_string(verdict), t.incumbent(), t.pairs(),
        t.plan().window_steps,
        ratio ? fmt::format("{:+.1f}%, {:+.1f}% to {:+.1f}%", 100.0 * std::expm1(ratio->estimate),
                            100.0 * std::expm1(ratio->low), 100.0 * std::expm1(ratio->high))
              : std::string("no look yet"));
    const bool final_check = t.final_check();
    const bool refinement = session.refinement_.running();
    session.trial_.reset();
    session.refinement_.set_running(false);
    if (final_check) {
      const std::string why = session.finishing_;
      if (verdict != TrialVerdict::kFaster) {
        session.incumbent_ = t.incumbent();
        return exploit(session, why + "; placement " + std::to_string(challenger.id) +
                                    " was not shown faster than the start, which the job keeps");
      }
      return exploit(session, why);
    }
    if (verdict == TrialVerdict::kFaster || verdict == TrialVerdict::kFasterByEstimate) {
      session.incumbent_ = challenger.id;
      // Exploration ended before refinement began: a long trial's win does not start it again.
      if (!refinement) session.since_improvement_ = 0;
    }
    if (refinement) {
      session.persist_best(store);
      const std::string why = session.finishing_;  // finish() and exploit() reset it
      return finish(session, why);
    }
    return after_candidate(session, store);
  }

  static std::optional<Next> next_candidate(Session& session) {
    if (std::optional<Proposal> p = session.propose())
      return issue(session, std::move(p->placement), p->reason, std::move(p->action));
    // How many of its samples the memory model refused says whether the policy converged or is
    // stuck where nothing it draws fits.
    const std::string why = fmt::format(
        "the policy only proposes placements already measured or rejected ({} samples so far "
        "repeated a measured placement, {} did not fit)",
        session.counters_.repeats_scored, session.counters_.rejected);
    if (session.best()) return finish(session, why);
    return fall_back(session, why);
  }

  static Directive start(Session& session) {
    session.state_ = SessionState::kProfiling;
    Placement start =
        session.job_start_ ? *session.job_start_ : Placement::single(*session.graph_, 0);
    start.enforce_pins(*session.graph_, session.job_.attach.devices);
    const Next first = issue(session, std::move(start), Reason::kStart, std::nullopt);
    session.incumbent_ = first.placement_id;  // in force from the first step
    return session.directive(first.placement_id, first.reason);
  }

  static bool record(Session& session, const placement::messages::StepReport& m) {
    if (session.state_ == SessionState::kDetached) return false;
    if (session.follower()) {
      ++session.counters_.steps;
      session.counters_.measured_seconds += m.step_time_s;
      if (!m.ok) {
        ++session.counters_.failed_steps;
      } else if (!m.profiled) {
        session.follower_step_times_.push_back(m.step_time_s);
        if (session.follower_step_times_.size() > kFollowerWindow)
          session.follower_step_times_.pop_front();
      }
      return false;
    }
    auto it = session.candidates_.find(m.placement_id);
    if (it == session.candidates_.end()) {
      ++session.counters_.stray_reports;
      return false;
    }
    CandidateRecord& c = it->second;
    const bool current = c.id == session.current_candidate_;
    ++session.counters_.steps;
    session.counters_.measured_seconds += m.step_time_s;
    ++c.steps_run;
    c.seconds_run += m.step_time_s;
    session.timeline_.add(session.counters_.steps - 1, c.id, session.incumbent_, m.step_time_s);
    bool window_full = false;
    bool measured = false;  // a step of the placement in force, past its warm-up
    // A profiled step is slower by its instrumentation: a step of the job, no measurement.
    if (m.profiled) {
      ++session.counters_.profiled_steps;
      c.record_profiled(m.step_time_s);
    } else if (m.ok) {
      if (current) ++session.screen_steps_;
      // The first steps after a swap are warm-up; a report in flight from before it is no such
      // step.
      if (current && session.warmup_left_ > 0) {
        --session.warmup_left_;
        ++c.warmup_steps;
      } else {
        c.record(m.step_time_s);
        measured = current;
        if (session.trial_ && current) window_full = session.trial_->add(c.id, m.step_time_s);
      }
    } else {
      if (c.failures++ == 0) {
        c.error = m.error;
        spdlog::info("job {} '{}': a step failed under placement {} ({}): {}", session.id_,
                     session.job_.name(), c.id, to_string(c.reason),
                     m.error.empty() ? "no reason given" : m.error);
      }
      ++session.counters_.failed_steps;
    }
    // Steps off the placement in force while exploring: a candidate's screening, its trial windows,
    // and the start's windows in the final check. What they cost is their time beyond the placement
    // in force's; so does the warm-up of each swap back to it within a trial.
    if (exploring(session.state_) && current && !m.profiled) {
      const bool off = c.id != session.incumbent_ && c.reason != Reason::kRemeasure;
      if (off) ++session.counters_.exploration_steps;
      if (off && !m.ok)
        session.counters_.exploration_cost_s += m.step_time_s;  // the job runs that batch again
      else if ((off || (session.trial_ && !measured)) && m.ok)
        if (const std::optional<double> cost = session.budget_.cost_of(m.step_time_s))
          session.counters_.exploration_cost_s += *cost;
    }
    // After a plugin failed, the placement in force stays: nothing is left to decide.
    if (session.advance_due_after_ || !current || !session.policy_error_.empty()) return false;
    const ExplorationConfig& e = session.policy_.exploration;
    bool due = false;
    if (session.state_ == SessionState::kExploiting) {
      session.drift_.observe(m.step_time_s, measured, m.ok && !m.profiled);
      due = session.drift_.drifted();
      due = due || (session.paused_ && may_resume(session));
    } else if (session.trial_) {
      due =
          window_full ||
          (!m.ok && (c.id == session.trial_->challenger() || c.id == session.trial_->incumbent()));
    } else if (session.state_ == SessionState::kProfiling || exploring(session.state_)) {
      due = !m.ok || session.screen_steps_ >= e.steps_per_candidate;
    }
    if (due) session.advance_due_after_ = m.step;
    return due;
  }

  static std::optional<Next> advance(Session& session, Store& store) {
    const ExplorationConfig& e = session.policy_.exploration;
    auto current = session.candidates_.find(session.current_candidate_);
    if (current == session.candidates_.end()) return std::nullopt;
    if (session.trial_) return advance_trial(session, store);

    if (session.state_ == SessionState::kExploiting && session.paused_ &&
        !session.drift_.drifted()) {
      session.paused_ = false;
      session.state_ = SessionState::kExploring;
      spdlog::info(
          "job {} '{}': exploration overhead down to {:.1f}% of the job's time; exploring again",
          session.id_, session.job_.name(),
          100.0 * session.counters_.exploration_cost_s / session.counters_.measured_seconds);
      return next_candidate(session);
    }
    if (session.state_ == SessionState::kExploiting &&
        session.counters_.reexplorations >= Session::kMaxReexplorations) {
      // A drift after this many: the placement in force stays, measured afresh from here on.
      session.drift_.restart();
      spdlog::info(
          "job {} '{}': step time drifted again; after {} re-explorations the job keeps its "
          "placement and "
          "measures its drift from here",
          session.id_, session.job_.name(), session.counters_.reexplorations);
      return std::nullopt;
    }
    if (session.state_ == SessionState::kExploiting) {
      // Drift: what was measured before no longer describes this machine. Re-measure the best,
      // then let the (already trained) policy try a few placements around it.
      session.paused_ = false;
      for (auto& [id, c] : session.candidates_) c.stale = true;
      session.state_ = SessionState::kReexploring;
      session.reexplore_left_ = std::max<int64_t>(3, e.max_candidates / 10);
      ++session.counters_.reexplorations;
      session.since_improvement_ = 0;
      spdlog::info("job {} '{}': step time drifted {}% above the best for {} steps; re-exploring",
                   session.id_, session.job_.name(), static_cast<int>(e.drift_threshold * 100),
                   e.drift_steps);
      return issue(session, current->second.placement, Reason::kRemeasure, std::nullopt);
    }

    // A screening finished (or failed).
    CandidateRecord& c = current->second;
    score(session, c);
    if (session.state_ == SessionState::kReexploring && c.reason != Reason::kRemeasure)
      --session.reexplore_left_;
    if (session.state_ == SessionState::kProfiling) {
      session.state_ = SessionState::kExploring;
      session.incumbent_ = c.id;
      session.since_improvement_ =
          0;  // the first measurement is progress: the policy state is saved
    } else if (c.reason == Reason::kRemeasure ||
               (!session.best() && c.failures == 0 && c.median())) {
      // A re-measurement is the incumbent afresh; so is the first candidate that ran at all when
      // the start failed (nothing runs to compare it with; the final check still tries the start).
      session.incumbent_ = c.id;
    } else if (worth_a_trial(session, c)) {
      // The challenger runs now: its first window starts without a swap.
      start_trial(session, session.incumbent_, c.id, false);
      return std::nullopt;
    }
    return after_candidate(session, store);
  }

  // What an advance or a stop ends with: the directive for `next` (naming the step that made the
  // advance due), if the job moves; the advance is done either way.
  static std::optional<Directive> conclude(Session& session, const std::optional<Next>& next) {
    std::optional<Directive> d;
    if (next) d = session.directive(next->placement_id, next->reason);
    session.advance_due_after_.reset();
    return d;
  }

  static std::optional<Next> stop(Session& session, const std::string& why) {
    session.paused_ = false;
    session.trial_.reset();
    session.refinement_.set_running(false);
    session.finishing_.clear();
    if (session.candidates_.empty())
      return std::nullopt;  // not started: its start placement comes next
    const uint64_t before = session.current_candidate_;
    // Without its final check, the winner of the trials is not kept, back to the start if it ran,
    // unless its own trial beat the start by evidence the final check would only repeat.
    if (const CandidateRecord* b = session.best(); b && !checked(session, *b)) {
      if (beat_the_start_for_good(session, *b, trials_held(session)))
        session.candidates_.at(b->id).trial->stands_for_final_check = true;
      else if (session.start_candidate()->median() && session.start_candidate()->failures == 0)
        session.incumbent_ = session.start_candidate()->id;
    }
    if (session.best()) {
      const Next next = exploit(session, why);
      if (next.placement_id == before) return std::nullopt;
      return next;
    }
    const auto current = session.candidates_.find(before);
    if (current != session.candidates_.end() &&
        current->second.placement.fingerprint() ==
            session.candidates_.begin()->second.placement.fingerprint()) {
      session.state_ = SessionState::kExploiting;
      session.incumbent_ = before;  // what it measures from now on is the best there is
      session.drift_.set_reference(current->second.median());
      return std::nullopt;
    }
    return fall_back(session, why);
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
      return store.offer(job_.uid, *graph_, job_.attach.devices,
                         {b->placement, *b->median(), job_.name()});
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its best placement: {}", id_, job_.name(), e.what());
  }
  return false;
}

void Session::persist_policy(Store& store) const {
  // A policy that threw may be half-updated: the next run starts from the last state saved.
  const placement::TrainablePolicy* policy = pipeline_ ? pipeline_->policy() : nullptr;
  if (!graph_ || !policy || !policy_error_.empty()) return;
  std::string state = policy->save_state();  // plugin code: what it throws is the caller's
  try {
    store.save_policy_state(job_.uid, *graph_, job_.attach.devices, policy_key(), std::move(state));
  } catch (const std::exception& e) {
    spdlog::error("job {} '{}': cannot persist its policy state: {}", id_, job_.name(), e.what());
  }
}

}  // namespace placementd
