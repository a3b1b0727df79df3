#pragma once
// One attached job: its graph, devices, policy objects and what it measured.

#include <sys/types.h>
#include <array>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "live/trial.h"
#include "placement/algorithm.h"
#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/grouper.h"
#include "placement/inspection.h"
#include "placement/messages.h"
#include "placement/placement.h"
#include "placement/placer.h"
#include "planning/offline/warm_start.h"
#include "planning/policy_pipeline.h"
#include "planning/sim/simulator.h"

namespace placementd {

/// attached → (graph) → profiling (the start placement is measured) → exploring → exploiting
/// (→ re-exploring on drift → exploiting) → detached: the state the job's directives carry.
using SessionState = placement::messages::JobState;
using placement::messages::Reason;

/// How a candidate's A/B trial against the placement in force ended.
struct TrialOutcome {
  /// The candidate it was compared with (the incumbent; the start in a final check).
  uint64_t against = 0;
  TrialVerdict verdict = TrialVerdict::kUndecided;
  /// log(this / against): estimate and interval at the last look's α (the trial's 1 − confidence
  /// shared among its looks); nullopt before a look.
  std::optional<ShiftInterval> log_ratio;
  int64_t pairs = 0;
  bool final_check = false;
  /// Why it ended without a test ("the start failed a step"); empty when the test decided.
  std::string note;
};

/// The median of `values`; nullopt when there are none.
std::optional<double> median_of(std::vector<double> values);

/// The outcome in words, as `placementctl jobs show` prints it.
std::string describe(const TrialOutcome& t);

/// Everything measured under one placement directive.
struct CandidateRecord {
  uint64_t id = 0;
  placement::Placement placement;
  /// Why it was issued (never kBest: the best is a candidate measured already).
  Reason reason = Reason::kStart;
  /// Measured steps: the warm-up after each swap to this placement is not among them.
  std::vector<double> step_times;
  uint64_t failures = 0;
  /// What the job said of the first failed step under it (an out-of-memory, an exception).
  std::string error;
  /// The policy's sample behind this placement; nullopt for start, cached and re-measured ones.
  std::optional<std::vector<int>> action;
  /// Measured before a drift: no longer comparable with what runs now.
  bool stale = false;
  /// The session's step count and seconds since attach when its screening was complete.
  std::optional<uint64_t> measured_at_step;
  std::optional<double> measured_at_s;
  /// Times of the steps the job ran under its per-op profiler here (not measurements): the
  /// latest kKeptSteps to 2 × kKeptSteps, like step_times (a job decides what it reports).
  std::vector<double> profiled_times;
  void record_profiled(double step_time_s);
  /// Steps discarded as warm-up after a swap to this placement.
  uint64_t warmup_steps = 0;
  /// Its A/B trial, when its screening made it a challenger (the last one, if it had several).
  std::optional<TrialOutcome> trial;
  /// Adds a measured step. The placement in force measures every step of a long job: only the
  /// latest kKeptSteps to 2 × kKeptSteps are kept, so its median follows the machine of late.
  void record(double step_time_s);
  static constexpr size_t kKeptSteps = 8192;
  /// Steps measured under it, all of them (step_times keeps the latest).
  uint64_t measured_steps = 0;
  /// Every step the job ran under it (warm-up, failed and profiled ones too) and their time: what
  /// the job spent on this placement.
  uint64_t steps_run = 0;
  double seconds_run = 0.0;
  /// Median of the measured steps; nullopt while none.
  std::optional<double> median() const;
  /// Mean of the measured steps (what a job's time adds up from, where the median is what
  /// comparisons use) and its 95% interval (normal, from the standard error); nullopt while none,
  /// the interval with fewer than 6 steps.
  std::optional<double> mean() const;
  std::optional<std::array<double, 2>> mean_interval() const;
  /// A distribution-free 95% confidence interval of that median (order statistics: the binomial
  /// ranks around it); nullopt with fewer than 6 measured steps, too few for one.
  std::optional<std::array<double, 2>> median_interval() const;
};

/// The state of a job's session: LiveSession's private part (live_session.h), which guards it;
/// the state machine (exploration.h) and the profile requests (live_profiles.h) work on it, and
/// their tests drive it directly.
struct Session {
  uint64_t id = 0;
  std::string job;
  uid_t uid = 0;
  pid_t pid = 0;
  std::string sdk_version;
  std::string torch_version;
  SessionState state = SessionState::kAttached;
  std::chrono::system_clock::time_point attached_at;
  std::chrono::steady_clock::time_point attached_steady;
  /// Set when the session ends (attached_s then stops growing).
  std::optional<std::chrono::steady_clock::time_point> detached_steady;
  /// The state the job was in when it detached (what it ended on: exploring, or done).
  SessionState state_at_detach = SessionState::kAttached;

  placement::DeviceSet devices;
  std::optional<placement::OpGraph> graph;
  std::string fingerprint;
  EffectivePolicy policy;
  std::unique_ptr<placement::Grouper> grouper;
  std::unique_ptr<placement::Placer> placer;
  std::unique_ptr<placement::Algorithm> algorithm;
  /// Grouper → placer over `graph` and `devices` (which it refers to): draws the candidates and
  /// holds the policy the algorithm trains.
  std::unique_ptr<PolicyPipeline> pipeline;
  std::mt19937_64 rng;

  /// The best placement this uid's earlier runs stored for this (graph, devices): the first
  /// candidate after the job's own start, kept only if a trial shows it faster.
  std::optional<placement::Placement> cached;
  /// The placement the job runs when it attaches (all on its first device unless it says
  /// otherwise).
  std::optional<placement::Placement> job_start;
  /// Memory model for pre-screening candidates (built from the uploaded graph and devices).
  std::optional<sim::Simulator> memory_model;
  /// What [policy] warm_start did before the first candidate (nullopt: not configured, or the
  /// policy state was resumed from an earlier run).
  std::optional<offline::ImitationResult> warm_start;
  /// The warm start is configured, the policy was not resumed, and it has not run yet: it waits
  /// for the job's profiles of every device kind (the simulator needs them), at most until the
  /// policy's first sample.
  bool warm_start_pending = false;
  /// The protocol version of the job's connection, and how many steps it profiles when a
  /// directive asks it to (0: it does not; protocol 1 jobs never do).
  uint16_t protocol_version = 1;
  int64_t job_profile_steps = 0;
  /// profile_report messages merged into `graph`, and steps the job ran under its profiler.
  uint64_t profile_reports = 0;
  uint64_t profiled_steps = 0;
  std::map<uint64_t, CandidateRecord> candidates;
  uint64_t current_candidate = 0;
  uint64_t steps = 0;
  uint64_t failed_steps = 0;
  double measured_seconds = 0.0;
  /// Steps the job expects to run (0: unknown); bounds exploration by max_overhead_fraction.
  uint64_t expected_steps = 0;
  /// Steps run on exploration candidates (not the start placement, not the best being exploited,
  /// not a re-measurement of it).
  uint64_t exploration_steps = 0;
  /// What exploration cost the job: the seconds its steps took beyond cost_reference (a candidate
  /// as fast as the placement in force costs nothing, a faster one earns time back), the warm-up
  /// of swaps back to the placement in force during a trial, and the whole of a failed step. This
  /// is what max_overhead_fraction bounds.
  double exploration_cost_s = 0.0;
  /// The mean step time of the placement in force over its latest measured steps, refreshed after
  /// each policy advance; nullopt until it has been measured.
  std::optional<double> cost_reference;
  /// Exploiting only until the job's time brings exploration back under its pace (jobs without
  /// expected_steps); exploration then resumes.
  bool paused = false;
  /// Whether the stored placement was offered as a candidate (once, right after the start).
  bool cached_tried = false;
  /// Whether "all on one device" was offered as a candidate (once, after the start and the stored).
  bool single_device_tried = false;
  /// Whether the warm start's placement (its policy's mode) was issued as a candidate.
  bool warm_start_tried = false;
  /// Policy samples the memory model rejected before they ran, and the devices at fault.
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_by_device;
  /// Policy samples scored from an earlier measurement of the same placement instead of running.
  uint64_t repeats_scored = 0;
  /// Candidates in a row that no trial showed faster than the incumbent.
  int64_t since_improvement = 0;
  /// Consecutive steps on the best placement slower than best × (1 + drift_threshold), and that
  /// best's median when exploitation began (a median per report would cost a job of a million
  /// steps a sort of its history at every step).
  int64_t drift_count = 0;
  std::optional<double> drift_reference;
  /// The first steps of an exploitation, whose median becomes drift_reference: fresh steps, not a
  /// median that mixes in thousands measured before a drift or ten from a screening.
  std::vector<double> drift_baseline;
  uint64_t reexplorations = 0;
  /// Each re-exploration adds candidates, and a job's own reported times start one: past this
  /// many, a drift only takes a new reference, so a session's candidates stay bounded.
  static constexpr uint64_t kMaxReexplorations = 64;
  int64_t reexplore_left = 0;
  /// The step of the report that made an advance due, until advance_session() or stop_exploring()
  /// runs it: no second advance is due meanwhile, and the directive it ends with names that step
  /// (after_step).
  std::optional<uint64_t> advance_due_after;
  /// Step reports that did not match this session (unknown placement id).
  uint64_t stray_reports = 0;
  /// Set when plugin code threw (what and where): exploration ended for good, the job runs its
  /// best (or start) placement, and the policy's state is no longer saved.
  std::string policy_error;
  /// The placement in force: the start until a challenger is shown faster in an A/B trial; the
  /// trials' reference, and the one the job keeps (after the final check).
  uint64_t incumbent = 0;
  /// The A/B trial running, if any (its windows alternate incumbent and challenger), and each arm's
  /// failed steps when it began (a failure before the trial is not the trial's).
  std::optional<Trial> trial;
  std::array<uint64_t, 2> trial_failures{};
  /// Why exploration ended, while the final check (the start against the choice) runs.
  std::string finishing;
  /// Steps still to discard as warm-up after the latest swap (to current_candidate).
  int64_t warmup_left = 0;

  /// Protocol 4: the job is one replica of a data-parallel group. A follower (rank > 0) runs the
  /// placement rank 0's daemon decides: it has no graph, candidates or directives here, only its
  /// steps, of which the latest kFollowerWindow give its current step time.
  std::optional<placement::messages::ReplicaInfo> replica;
  std::deque<double> follower_step_times;
  static constexpr size_t kFollowerWindow = 64;
  bool follower() const { return replica && replica->follower(); }
  /// Steps run under current_candidate since it was issued for screening (warm-up included).
  int64_t screen_steps = 0;

  /// What ran when (`placementctl jobs show --plot`): at most TimelinePoint::kMaxPoints points of
  /// at most timeline_stride steps each; the stride doubles as neighbours merge.
  std::vector<placement::messages::TimelinePoint> timeline;
  uint64_t timeline_stride = 1;
  /// Every trial's end (a candidate's trial and its final check are two), as many as trials ran:
  /// at most two a candidate.
  std::vector<placement::messages::TrialMark> trial_marks;
  /// Adds the step just counted (steps) that ran `placement` in `step_time_s`.
  void add_to_timeline(uint64_t placement, double step_time_s);

  /// The placement in force (`incumbent`) once it has a measurement; nullptr before. It is never
  /// a candidate measured a hair faster over a few noisy steps: only a trial unseats it.
  const CandidateRecord* best() const;
  /// The placement the job ran first (the stored best, else its own).
  const CandidateRecord* start() const;
  /// What profiling cost beyond the placements' own step times, on candidates that are not
  /// exploration (the start; an exploration candidate's steps all count as exploration already).
  double profiling_overhead_seconds() const;
  /// The device kinds ("cpu", "cuda") some op of the graph has a profile for.
  std::set<std::string> profiled_kinds() const;
  /// Summary for `placementctl jobs`.
  placement::messages::JobSummary summary() const;
  /// summary() plus per-candidate detail, for `placementctl jobs show`.
  placement::messages::JobInfo detail() const;
};

}  // namespace placementd
