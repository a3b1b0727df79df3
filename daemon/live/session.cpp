#include "live/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "live/store.h"
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
                        : t.verdict == TrialVerdict::kFasterByEstimate
                            ? "faster by its estimate than "
                            : "on trial against ";
  std::string out = verdict + std::string(t.final_check ? "the start " : "") +
                    std::to_string(t.against) + (t.refinement ? " in a long trial" : "");
  if (!t.note.empty())
    out += " (" + t.note + ")";
  else if (t.verdict == TrialVerdict::kUnclear)
    out += " (unclear at the cap or the budget's end)";
  else if (t.verdict == TrialVerdict::kFasterByEstimate)
    out += " (unclear at the cap or the budget's end; taken for its estimate's side)";
  if (t.log_ratio)
    out += ": " + percent(t.log_ratio->estimate) + " (" + percent(t.log_ratio->low) + " to " +
           percent(t.log_ratio->high) + ")";
  return out + ", " + std::to_string(t.pairs) + " pairs" +
         (t.stands_for_final_check ? "; it stood for the final check" : "");
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

Session::Session(uint64_t id, JobIdentity job, EffectivePolicy policy)
    : id_(id),
      job_(std::move(job)),
      policy_(std::move(policy)),
      attached_at_(std::chrono::system_clock::now()),
      attached_steady_(std::chrono::steady_clock::now()),
      rng_(id),
      budget_(policy_.exploration.max_overhead_fraction, job_.attach.expected_steps),
      drift_(policy_.exploration.drift_threshold, policy_.exploration.drift_steps),
      refinement_(policy_.exploration.refine_fraction, job_.attach.expected_steps) {
  if (follower()) state_ = SessionState::kFollowing;
}

// The algorithm points into the pipeline's policy, the pipeline at the plugins and the graph:
// they go in that order.
Session::~Session() { drop_graph(); }

placement::messages::GraphAccepted Session::take_graph(placement::OpGraph graph,
                                                       std::optional<placement::Placement> start,
                                                       Plugins plugins,
                                                       const sim::SimulatorOptions& memory_options,
                                                       const Store& store) {
  grouper_ = std::move(plugins.grouper);
  placer_ = std::move(plugins.placer);
  algorithm_ = std::move(plugins.algorithm);
  graph_ = std::move(graph);
  const placement::OpGraph& g = *graph_;
  pipeline_ = std::make_unique<PolicyPipeline>(*grouper_, *placer_, g, job_.attach.devices, rng_,
                                               static_cast<int>(policy_.max_groups));
  placement::TrainablePolicy* policy = pipeline_->policy();
  algorithm_->reset({policy, policy_.exploration.failing_reward});
  fingerprint_ = g.fingerprint();
  if (auto stored = store.best(job_.uid, g, job_.attach.devices)) cached_ = stored->placement;
  bool resumed = false;
  if (policy)
    if (auto state = store.policy_state(job_.uid, g, job_.attach.devices, policy_key())) {
      // A state from another version of the plugin, or one it cannot read: learning starts
      // afresh, the job goes on.
      try {
        policy->load_state(*state);
        resumed = true;
      } catch (const std::exception& e) {
        spdlog::warn("job {} '{}': stored policy state not used: {}", id_, job_.name(), e.what());
      } catch (...) {
        spdlog::warn(
            "job {} '{}': stored policy state not used: load_state threw an exception that is "
            "not a std::exception",
            id_, job_.name());
      }
    }
  memory_model_.emplace(g, job_.attach.devices, memory_options);
  // A fresh policy first imitates the configured baseline, so its first live candidates are a
  // heuristic's rather than uniform noise; a resumed one has learned more than that already.
  // It runs once the job trains (LiveSession::run_deferred_work()), so the first directive does
  // not wait.
  warm_start_pending_ = !resumed && !policy_.warm_start.empty();
  job_start_ = std::move(start);
  const placement::Grouping& grouping = pipeline_->grouping();
  spdlog::info("job {} '{}': graph {} with {} ops in {} groups{}{}{}", id_, job_.name(),
               fingerprint_, g.ops.size(), grouping.num_groups,
               pipeline_->learned_grouping() ? " (learned grouping, regrouped every sample)" : "",
               cached_ ? ", stored best placement found" : "",
               resumed ? ", policy state resumed" : "");
  return {fingerprint_,        g.ops.size(),        g.edges.size(),
          grouping.num_groups, cached_.has_value(), resumed};
}

void Session::drop_graph() {
  algorithm_.reset();
  pipeline_.reset();
  placer_.reset();
  grouper_.reset();
  warm_start_.reset();
  warm_start_pending_ = false;
  heuristics_.clear();
  refit_.reset();
  refitted_model_.reset();
  ranking_failed_ = false;
  refit_tried_ = true;
  next_refit_at_ = kFirstRefitAt;
  refits_.clear();
  memory_model_.reset();
  graph_.reset();
  fingerprint_.clear();
  cached_.reset();
  job_start_.reset();
}

bool Session::warm_start_due(WarmStartWhen when) const {
  // Not before the job trains on its first placement, and never after a plugin failed.
  if (!warm_start_pending_ || state_ == SessionState::kDetached || candidates_.empty() ||
      !policy_error_.empty())
    return false;
  // The simulator imitates best with profiles of every device kind; a job that does not profile
  // sends none, and before the first sample it runs on what there is (some kind's profiles never
  // came: its candidate failed).
  if (!can_profile() || fully_profiled()) return true;
  return when == WarmStartWhen::kBeforeFirstSample && single_device_tried_;
}

void Session::run_warm_start(const PluginRegistry& registry) {
  warm_start_pending_ = false;
  offline::ImitationOptions imitation;
  imitation.baseline = policy_.warm_start;
  // The search runs on the session's strand while the job trains on its start placement and
  // holds up only this job's next candidate; [policy] warm_start_seconds bounds it.
  imitation.search.max_seconds = policy_.warm_start_seconds;
  // The heuristics' candidates are the placements the search could start from: the same seed.
  const uint64_t seed = rng_();
  warm_started(offline::imitate_baseline(pipeline_->policy(), *memory_model_, registry,
                                         pipeline_->grouping(), imitation, seed,
                                         pipeline_->action_for({})));
  plan_heuristic_candidates(registry, seed);
}

void Session::warm_started(offline::ImitationResult result) {
  warm_start_pending_ = false;
  warm_start_ = std::move(result);
  if (warm_start_->skipped.empty())
    spdlog::info(
        "job {} '{}': policy warm-started from {} in {} steps (per-group probability {:.2f} -> "
        "{:.2f})",
        id_, job_.name(), warm_start_->baseline, warm_start_->steps,
        warm_start_->probability_before, warm_start_->probability_after);
  else
    spdlog::warn("job {} '{}': no warm start: {}", id_, job_.name(), warm_start_->skipped);
}

void Session::detach() {
  if (state_ == SessionState::kDetached) return;
  state_at_detach_ = state_;
  state_ = SessionState::kDetached;
  detached_steady_ = std::chrono::steady_clock::now();
}

void Session::retire() {
  detach();
  drop_graph();
  candidates_.clear();
}

const CandidateRecord* Session::best() const {
  const auto it = candidates_.find(incumbent_);
  // No median is taken to know there is one: this runs after every window of a trial, and the
  // placement in force keeps thousands of steps.
  if (it == candidates_.end() || it->second.step_times.empty()) return nullptr;
  return &it->second;
}

const CandidateRecord* Session::start_candidate() const {
  return candidates_.empty() ? nullptr : &candidates_.begin()->second;
}

double Session::profiling_overhead_seconds() const {
  double extra = 0.0;
  for (const auto& [id, c] : candidates_) {
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
  if (graph_)
    for (const placement::Op& op : graph_->ops)
      for (const auto& [kind, profile] : op.profile)
        if (!profile.predicted) kinds.insert(kind);
  return kinds;
}

void Timeline::add(uint64_t step, uint64_t placement, uint64_t best, double step_time_s) {
  using placement::messages::TimelinePoint;
  TimelinePoint* last = points_.empty() ? nullptr : &points_.back();
  if (last && last->placement == placement && last->best == best && last->steps < stride_) {
    ++last->steps;
    last->mean_step_time_s += (step_time_s - last->mean_step_time_s) / last->steps;
    return;
  }
  points_.push_back({step, 1, placement, best, step_time_s});
  if (points_.size() <= TimelinePoint::kMaxPoints) return;
  // Halve the resolution: each pair of neighbours becomes one point of their steps.
  stride_ *= 2;
  std::vector<TimelinePoint> merged;
  merged.reserve(points_.size() / 2 + 1);
  for (size_t i = 0; i < points_.size(); i += 2) {
    if (i + 1 == points_.size()) {
      merged.push_back(points_[i]);
      break;
    }
    const TimelinePoint& a = points_[i];
    const TimelinePoint& b = points_[i + 1];
    TimelinePoint m = a;
    m.steps = a.steps + b.steps;
    m.mean_step_time_s = (a.mean_step_time_s * a.steps + b.mean_step_time_s * b.steps) /
                         static_cast<double>(m.steps);
    if (b.placement != a.placement) m.placement = 0;
    m.best = b.best;
    merged.push_back(m);
  }
  points_ = std::move(merged);
}

placement::messages::JobSummary Session::summary() const {
  const CandidateRecord* b = best();
  placement::messages::JobSummary out;
  if (!candidates_.empty()) out.start_step_time_s = candidates_.begin()->second.median();
  if (b) out.best_step_time_s = b->median();
  if (!candidates_.empty())
    out.start_step_time_interval_s = candidates_.begin()->second.median_interval();
  if (b) out.best_step_time_interval_s = b->median_interval();
  if (auto it = candidates_.find(current_candidate_); it != candidates_.end())
    out.current_step_time_s = it->second.median();
  // What exploration cost beyond the placement in force's step time, and profiling beyond the
  // start's own, as a fraction of measured step time (0 when exploration earned more time back than
  // it cost: a challenger faster than the incumbent ran before a trial showed it).
  const double profiling = profiling_overhead_seconds();
  out.exploration_overhead =
      counters_.measured_seconds > 0
          ? std::max(0.0, counters_.exploration_cost_s + profiling) / counters_.measured_seconds
          : 0.0;
  if (out.start_step_time_s && out.best_step_time_s && *out.best_step_time_s > 0)
    out.speedup = *out.start_step_time_s / *out.best_step_time_s;
  out.job_s = counters_.measured_seconds;
  // Against the start: what the job's batches would have taken had it stayed there. Times add up
  // as means do: a median below a skewed mean would show a job that never left the start as slower.
  const double batches = static_cast<double>(counters_.steps - counters_.failed_steps);
  if (const CandidateRecord* s = start_candidate();
      s && s->mean() && counters_.measured_seconds > 0) {
    out.start_mean_step_time_s = s->mean();
    out.realized_speedup = *s->mean() * batches / counters_.measured_seconds;
    if (auto interval = s->mean_interval())
      out.realized_speedup_interval =
          std::array<double, 2>{(*interval)[0] * batches / counters_.measured_seconds,
                                (*interval)[1] * batches / counters_.measured_seconds};
  }
  if (b) {
    const double best_mean = *b->mean();
    double beyond = 0.0;
    for (const auto& [cid, c] : candidates_)
      if (cid != incumbent_)
        beyond += c.seconds_run - static_cast<double>(c.steps_run - c.failures) * best_mean;
    out.beyond_best_s = beyond;
  }
  out.current_placement = current_candidate_;
  if (b) out.best_placement = incumbent_;
  out.on_best = b && current_candidate_ == incumbent_;
  const SessionState ended = state_ == SessionState::kDetached ? state_at_detach_ : state_;
  out.exploration_finished = ended == SessionState::kExploiting && !paused_ && finishing_.empty();
  // When the search first got within 2% of the best it has now (issue #5's convergence figure). A
  // record a drift made stale counts by its placement's fresh median: the search had found that
  // placement then, whatever the machine did after.
  std::map<std::string, std::optional<double>>
      fresh;  // by fingerprint, once a drift made any stale
  if (b && std::any_of(candidates_.begin(), candidates_.end(),
                       [](const auto& kv) { return kv.second.stale; }))
    for (const auto& [cid, c] : candidates_)
      if (!c.stale) fresh.emplace(c.placement.fingerprint(), c.median());
  if (b)
    for (const auto& [cid, c] : candidates_) {
      std::optional<double> m;
      if (!c.stale) {
        m = c.median();
      } else if (const auto f = fresh.find(c.placement.fingerprint()); f != fresh.end()) {
        m = f->second;
      }
      if (!m || !c.measured_at_step || *m > 1.02 * *out.best_step_time_s) continue;
      out.steps_to_within_2pct = *c.measured_at_step;
      out.seconds_to_within_2pct = *c.measured_at_s;
      break;
    }
  // How much of the exploration budget is spent: candidates against max_candidates, and the cost
  // against max_overhead_fraction of the time of the steps the job said it will run (or, without
  // them, of the time measured so far: the pace).
  const auto& e = policy_.exploration;
  double budget_used =
      e.max_candidates > 0 ? static_cast<double>(candidates_.size()) / e.max_candidates : 1.0;
  budget_used =
      std::max(budget_used, budget_.used(counters_.exploration_cost_s, counters_.measured_seconds));
  if ((state_ == SessionState::kExploiting && !paused_) || state_ == SessionState::kDetached)
    budget_used = 1.0;
  out.budget_used = std::min(budget_used, 1.0);
  const auto end = detached_steady_ ? *detached_steady_ : std::chrono::steady_clock::now();
  out.attached_s = std::chrono::duration<double>(end - attached_steady_).count();
  out.id = id_;
  out.name = job_.name();
  out.uid = job_.uid;
  out.pid = job_.pid;
  out.state = state_;
  out.fingerprint = fingerprint_;
  out.ops = graph_ ? graph_->ops.size() : 0;
  out.groups = pipeline_ ? pipeline_->grouping().num_groups : 0;
  out.devices = job_.attach.devices.size();
  out.grouper = policy_.grouper;
  out.placer = policy_.placer;
  out.algorithm = policy_.algorithm;
  out.steps = counters_.steps;
  out.failed_steps = counters_.failed_steps;
  out.candidates_tried = candidates_.size();
  out.max_candidates = policy_.exploration.max_candidates;
  out.exploration_steps = counters_.exploration_steps;
  out.expected_steps = job_.attach.expected_steps;
  out.paused = paused_;
  out.rejected = counters_.rejected;
  out.repeats_scored = counters_.repeats_scored;
  out.reexplorations = counters_.reexplorations;
  const std::set<std::string> kinds = profiled_kinds();
  out.profiled_kinds.assign(kinds.begin(), kinds.end());
  out.profiled_steps = counters_.profiled_steps;
  out.profiling_overhead_s = profiling;
  if (!policy_error_.empty()) out.policy_error = policy_error_;
  out.replica = job_.attach.replica;
  if (follower()) {
    out.current_step_time_s = median_of({follower_step_times_.begin(), follower_step_times_.end()});
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
  for (const auto& [cid, c] : candidates_) {
    placement::messages::CandidateInfo ci;
    ci.id = cid;
    ci.reason = c.reason;
    ci.stale = c.stale;
    ci.placement_fingerprint = c.placement.fingerprint();
    for (auto n : c.placement.ops_per_device(job_.attach.devices.size()))
      ci.ops_per_device.push_back(n);
    ci.steps = c.measured_steps + c.warmup_steps;
    ci.failures = c.failures;
    if (!c.error.empty()) ci.error = c.error;
    ci.median_step_time_s = c.median();
    ci.peak_bytes = c.peak_bytes;
    ci.held_bytes = c.held_bytes;
    if (c.trial) ci.trial = describe(*c.trial);
    info.candidates.push_back(std::move(ci));
  }
  for (const auto& d : job_.attach.devices.devices) info.device_names.push_back(d.name());
  info.stray_reports = counters_.stray_reports;
  info.profile_reports = counters_.profile_reports;
  info.profile_reports_dropped = counters_.profile_reports_dropped;
  info.rejected_by_device = counters_.rejected_by_device;
  info.warm_start = warm_start_ ? offline::to_json(*warm_start_) : nlohmann::json(nullptr);
  if (warm_start_ && warm_start_->skipped.empty()) {
    info.warm_start["placement_fingerprint"] = warm_start_->placement.fingerprint();
  }
  if (!heuristics_.report().empty()) {
    // An offered heuristic's placement had not run before, so the first candidate with it is its
    // own; one still waiting when the first exploration ended never ran.
    nlohmann::json heuristics = heuristics_.report();
    for (nlohmann::json& h : heuristics) {
      if (h.value("offered", false)) {
        for (const placement::messages::CandidateInfo& c : info.candidates)
          if (c.placement_fingerprint == h["placement_fingerprint"].get<std::string>()) {
            h["candidate"] = c.id;
            break;
          }
      } else if (!h.contains("not_offered") && state_ != SessionState::kProfiling &&
                 state_ != SessionState::kExploring) {
        h["not_offered"] = "exploration ended before its turn";
      }
      h.erase("offered");
    }
    info.warm_start["heuristics"] = std::move(heuristics);
  }
  info.refits = refits_;
  info.timeline = timeline_.points();
  info.trials = timeline_.marks();
  return info;
}

}  // namespace placementd
