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

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "live/drift_watch.h"
#include "live/exploration_budget.h"
#include "live/heuristic_queue.h"
#include "live/median.h"
#include "live/refinement.h"
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
#include "plugins/plugin_registry.h"

namespace placementd {

class Store;
struct Proposal;

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
  /// One of refinement's long trials (ExplorationConfig::refine_contenders).
  bool refinement = false;
  /// Why it ended without a test ("the start failed a step"); empty when the test decided.
  std::string note;
  /// Trial::p_faster() at its end when it said "faster" by its test; 1 otherwise.
  double p_faster = 1.0;
  /// A trial against the start whose evidence held across every trial the session held: it
  /// stood for the final check, which would have repeated the same comparison.
  bool stands_for_final_check = false;
};

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
  /// Per device, the most it held in the forward and backward of the job's profiled steps here,
  /// as the job measured it (its latest profile report that had any); empty: none measured.
  std::vector<uint64_t> peak_bytes;
  /// Per device, what lived there by kind (the same report's held_bytes).
  std::vector<placement::messages::HeldBytes> held_bytes;
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

/// Who the job is and what it said when it attached: set then, never changed.
struct JobIdentity {
  /// Its attach message, whole: its name (`job`), devices (the node's [devices] figures filled in
  /// where it sent none), versions, the steps it expects to run (0: unknown; they bound
  /// exploration by max_overhead_fraction) and profiles when a directive asks (absent or 0: it
  /// does not), and, protocol 4, its replica group (a follower when its rank is not 0). A new
  /// attach field reaches the session here with nothing copying it on the way.
  placement::messages::Attach attach;
  uid_t uid = 0;
  pid_t pid = 0;
  /// The protocol version of its connection (profile reports need 2).
  uint16_t protocol_version = 1;
  const std::string& name() const { return attach.job; }
  int64_t profile_steps() const { return attach.profile_steps.value_or(0); }
};

/// What ran when (`placementctl jobs show --plot`): at most TimelinePoint::kMaxPoints points of at
/// most stride() steps each; the stride doubles as neighbours merge. And every trial's end (a
/// candidate's trial and its final check are two): at most two a candidate.
class Timeline {
 public:
  /// Adds step `step` (the job's step count before it: one more than the last added) that ran
  /// `placement` in `step_time_s` while `best` was in force.
  void add(uint64_t step, uint64_t placement, uint64_t best, double step_time_s);
  void mark(placement::messages::TrialMark mark) { marks_.push_back(std::move(mark)); }

  const std::vector<placement::messages::TimelinePoint>& points() const { return points_; }
  uint64_t stride() const { return stride_; }
  const std::vector<placement::messages::TrialMark>& marks() const { return marks_; }

 private:
  std::vector<placement::messages::TimelinePoint> points_;
  uint64_t stride_ = 1;
  std::vector<placement::messages::TrialMark> marks_;
};

/// What a session counted: read by inspection and tests, changed only by the session.
struct SessionCounters {
  /// Steps the job reported (all of them), those that failed, and the seconds they took.
  uint64_t steps = 0;
  uint64_t failed_steps = 0;
  double measured_seconds = 0.0;
  /// Steps run on exploration candidates (not the start placement, not the best being exploited,
  /// not a re-measurement of it).
  uint64_t exploration_steps = 0;
  /// What exploration cost the job: the seconds its steps took beyond the cost reference (a
  /// candidate as fast as the placement in force costs nothing, a faster one earns time back), the
  /// warm-up of swaps back to the placement in force during a trial, and the whole of a failed
  /// step. This is what max_overhead_fraction bounds.
  double exploration_cost_s = 0.0;
  /// Policy samples the memory model rejected before they ran, and the devices at fault.
  uint64_t rejected = 0;
  std::map<std::string, uint64_t> rejected_by_device;
  /// Policy samples scored from an earlier measurement of the same placement instead of running.
  uint64_t repeats_scored = 0;
  uint64_t reexplorations = 0;
  /// Times the planning model was refitted to the job's measured steps (refit.cpp).
  uint64_t refits = 0;
  /// Step reports that did not match this session (unknown placement id).
  uint64_t stray_reports = 0;
  /// profile_report messages merged into the graph, and steps the job ran under its profiler.
  uint64_t profile_reports = 0;
  uint64_t profiled_steps = 0;
  /// profile_report messages no directive asked for (or a second for one that did): dropped
  /// unread, since each took a pass over the whole graph.
  uint64_t profile_reports_dropped = 0;
};

/// One job's session: what it attached with, its graph and the policy's plugins built on it, and
/// the state machine that picks its placements (exploration.h). Its state is changed only by its
/// own members, which live by concern in this folder: the graph, the warm start, inspection and
/// the timeline here (session.cpp); the state machine in exploration.cpp; where candidates come
/// from in candidates.cpp; profiles in live_profiles.cpp; the planning model's refit in refit.cpp;
/// the directive in directive.cpp.
/// LiveSession (live_session.h) guards it with a lock and the plugin-failure guard; tests drive
/// it directly.
class Session {
 public:
  /// `id` also seeds the session's random numbers. A follower (job.replica, rank > 0) is in state
  /// following from the start.
  Session(uint64_t id, JobIdentity job, EffectivePolicy policy);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // --- Who (set at attach, never changed) ---
  uint64_t id() const { return id_; }
  const JobIdentity& job() const { return job_; }
  const placement::DeviceSet& devices() const { return job_.attach.devices; }
  const EffectivePolicy& policy() const { return policy_; }
  /// Protocol 4: a replica of rank > 0 runs the placement rank 0's daemon decides: it has no
  /// graph, candidates or directives here, only its steps, of which the latest kFollowerWindow
  /// give its current step time.
  bool follower() const { return job_.attach.replica && job_.attach.replica->follower(); }
  static constexpr size_t kFollowerWindow = 64;

  // --- The graph and what is built on it (session.cpp) ---
  /// The policy's plugins, created for this job's [policy].
  struct Plugins {
    std::unique_ptr<placement::Grouper> grouper;
    std::unique_ptr<placement::Placer> placer;
    std::unique_ptr<placement::Algorithm> algorithm;
  };
  /// Takes the job's graph and the placement it runs now (else all on its first device): builds
  /// the policy pipeline over `plugins` (plugin code: what it throws is the caller's, and the
  /// caller then calls drop_graph()), resumes this uid's stored policy state for it if the policy
  /// can read it, finds the stored best placement, and builds the memory model.
  placement::messages::GraphAccepted take_graph(placement::OpGraph graph,
                                                std::optional<placement::Placement> start,
                                                Plugins plugins,
                                                const sim::SimulatorOptions& memory_options,
                                                const Store& store);
  /// Lets go of the graph and everything built on it (plugins, policy, memory model).
  void drop_graph();
  const std::optional<placement::OpGraph>& graph() const { return graph_; }
  const std::string& fingerprint() const { return fingerprint_; }
  /// nullptr before the graph.
  const PolicyPipeline* pipeline() const { return pipeline_.get(); }
  const sim::Simulator* memory_model() const { return memory_model_ ? &*memory_model_ : nullptr; }

  // --- The warm start (session.cpp) ---
  /// When a pending [policy] warm_start runs: once the graph has profiles of every device kind of
  /// the job (at once for a job that does not profile) or, at the latest, before the policy's
  /// first sample (after the start and the all-on-one-device candidate).
  enum class WarmStartWhen { kProfiled, kBeforeFirstSample };
  bool warm_start_due(WarmStartWhen when) const;
  /// Runs the warm start (plugin code; seconds, bounded by [policy] warm_start_seconds).
  void run_warm_start(const PluginRegistry& registry);
  /// Takes what a warm start found (run_warm_start's; tests hand one in): its placement is the
  /// first policy candidate.
  void warm_started(offline::ImitationResult result);
  /// What [policy] warm_start did (nullopt: not configured, not run yet, or the policy state was
  /// resumed from an earlier run).
  const std::optional<offline::ImitationResult>& warm_start() const { return warm_start_; }

  // --- The heuristics' placements, after the warm start's answer (candidates.cpp) ---
  /// After a "simulator" warm start: the placements of the heuristics its search may start from
  /// (offline::kSearchStarts but the single_device placer's: all on one device is a candidate of
  /// its own) become candidates of the first exploration, fastest on the planning model first,
  /// each that fits, did not run, and that the model (the warm start's, not a refit's: the screen
  /// is for cost, not a ranking) predicts within kHeuristicWithin of the warm start's answer. The
  /// model's search leaves a heuristic's placement where the model is wrong about what it does
  /// well: on the papers' BERT over NVLink with every link's figure off by 2-4x, the expert's layer
  /// split ran 2% faster than the search's answer, which no policy sample came near (issue #45).
  /// Plugin code (the placers, seeded with `seed`, the warm start's seed); milliseconds.
  void plan_heuristic_candidates(const PluginRegistry& registry, uint64_t seed);
  /// A heuristic's placement the model predicts slower than this times the warm start's answer is
  /// not offered: wherever the model is right, its screening would cost that much more a step (a
  /// cut over a slow link, most ops on a CPU); docs/learning.md.
  static constexpr double kHeuristicWithin = 1.5;
  /// The swapped copies of the warm start's answer offered after the heuristics' placements
  /// (plan_relabelings), at most, and how close to the answer the planning model must predict
  /// them: a tie it cannot break.
  static constexpr size_t kMaxRelabelings = 3;
  static constexpr double kRelabelingTie = 0.01;

 private:
  /// Queues the swapped copies of the warm start's answer (candidates.cpp).
  void plan_relabelings();

 public:
  // --- The planning model refitted to the job's steps (refit.cpp) ---
  /// After a "simulator" warm start, in the job's first exploration, once it has measured 3, then
  /// 6, 12 ... placements (up to [policy] refits times): the planning model, refitted to their
  /// medians (sim::refit), is searched again and the policy imitates the answer, which is the next
  /// candidate (issue #45); an answer that ran already is neither imitated nor offered.
  static constexpr size_t kFirstRefitAt = 3;
  bool refit_due() const;
  /// Runs it (plugin code: the search's heuristics and the policy's imitation; seconds, bounded
  /// by [policy] warm_start_seconds).
  void run_refit(const PluginRegistry& registry);

  // --- The state machine (exploration.cpp; exploration.h tells its story) ---
  /// After the graph: the job's start placement (the stored best comes later, as a candidate).
  /// Enters profiling.
  placement::messages::Directive start();
  /// One step report (cheap). Returns true when the policy has to run advance() now: the current
  /// candidate's screening finished (k good steps) or failed, a trial's window is full, or the
  /// best placement drifted. Reports of earlier placements still count for their own candidate
  /// (outside any trial window). A follower only counts its steps.
  bool record(const placement::messages::StepReport& report);
  /// Policy work (seconds for big policies: run it off the I/O thread): scores the screened
  /// candidate and trains the policy on it, or closes a trial's window and looks; persists the
  /// incumbent and the policy state in `store`, and picks what runs next. nullopt: the job keeps
  /// its current placement.
  std::optional<placement::messages::Directive> advance(Store& store);
  /// Ends exploration for good (`why`): the incumbent runs from now on (a trial in progress is
  /// dropped), or the start placement when none measured well. Returns the directive that moves
  /// the job there; nullopt when it runs that placement already. No plugin code runs.
  std::optional<placement::messages::Directive> stop_exploring(const std::string& why);
  /// Plugin code threw `what`: the same, and the policy's state is no longer saved (it may be
  /// half-updated); `jobs show` says why.
  std::optional<placement::messages::Directive> policy_failed(std::string what);
  /// Offers the incumbent to the store, once it is the start or passed the final check (as on
  /// detach, disconnect and SIGTERM); a store that cannot write is logged. Returns true if it was
  /// written.
  bool persist_best(Store& store) const;
  /// Saves the policy's state, unless the policy failed. A store that cannot write is logged;
  /// what the policy's save_state() throws is the caller's (LiveSession's guard).
  void persist_policy(Store& store) const;
  /// The store's key for the policy state: grouper+placer+algorithm.
  std::string policy_key() const;
  /// The job has gone: the state it ended in is kept for inspection (attached_s stops growing).
  void detach();
  /// Keeps what inspection shows of a detached session and lets go of the rest: the graph and
  /// everything built on it, and every candidate.
  void retire();

  // --- Profiles (live_profiles.cpp) ---
  /// Whether the job profiles its steps when asked (protocol 2, profile steps above 0).
  bool can_profile() const;
  /// Whether the job should profile its steps under `placement`: it can, and the placement puts
  /// an op on a device kind it has no measured profile for (any op, before the first report; after
  /// it, ops no report named are not waited for) — on one device of that kind, unless the
  /// all-on-one-device candidate that follows the start will not run on it (a split's op times
  /// include copies between devices).
  bool wants_profile(const placement::Placement& placement) const;
  /// Whether every op the job's profiler times has a measured profile on every kind of the job's
  /// devices it may run on.
  bool fully_profiled() const;
  /// Merges `report` into the graph, fills the profiles still missing from the measured ones
  /// (fill_profile_gaps: predicted, until measured) and rebuilds the memory model with the
  /// measured activation sizes. Throws std::invalid_argument naming the entry at fault (an op the
  /// graph lacks, a kind none of the job's devices has, a placement id never issued); nothing
  /// changes then.
  void apply_profiles(const placement::messages::ProfileReport& report);
  /// Whether a profile report for `placement_id` answers a directive that asked the job to
  /// profile and that no report has answered yet (apply_profiles answers it); if not, it is
  /// counted as dropped. A placement never issued answers true: apply_profiles names it.
  bool profile_asked(uint64_t placement_id);

  // --- The directive (directive.cpp) ---
  /// The one place a directive is made: candidate `placement_id` for `reason`, with the
  /// candidate's placement, the session's state, whether the job profiles under it, and, when a
  /// step report made the session decide it, that report's step (advance_due_after()).
  placement::messages::Directive directive(uint64_t placement_id, Reason reason) const;

  // --- What it knows ---
  SessionState state() const { return state_; }
  const std::map<uint64_t, CandidateRecord>& candidates() const { return candidates_; }
  /// The placement the job runs now.
  uint64_t current_candidate() const { return current_candidate_; }
  /// The placement in force: the start until a challenger is shown faster in an A/B trial; the
  /// trials' reference, and the one the job keeps (after the final check).
  uint64_t incumbent() const { return incumbent_; }
  /// The A/B trial running, if any.
  const std::optional<Trial>& trial() const { return trial_; }
  const SessionCounters& counters() const { return counters_; }
  /// Exploiting only until the job's time brings exploration back under its pace.
  bool paused() const { return paused_; }
  /// The step of the report that made an advance due, until advance() or stop_exploring() runs
  /// it: no second advance is due meanwhile, and the directive it ends with names that step.
  std::optional<uint64_t> advance_due_after() const { return advance_due_after_; }
  /// Candidates in a row that no trial showed faster than the incumbent (converge_candidates).
  int64_t since_improvement() const { return since_improvement_; }
  /// The median step time of the placement in force that a drift is measured from (taken from the
  /// first steps of an exploitation); nullopt until then.
  std::optional<double> drift_reference() const { return drift_.reference(); }
  /// Whether "all on one device" was offered as a candidate (once, after the start and the
  /// stored best).
  bool single_device_tried() const { return single_device_tried_; }
  /// What plugin code threw, and where; empty while none did.
  const std::string& policy_error() const { return policy_error_; }
  const Timeline& timeline() const { return timeline_; }
  /// The placement in force (`incumbent`) once it has a measurement; nullptr before. It is never
  /// a candidate measured a hair faster over a few noisy steps: only a trial unseats it.
  const CandidateRecord* best() const;
  /// The placement the job ran first (its own).
  const CandidateRecord* start_candidate() const;
  /// What profiling cost beyond the placements' own step times, on candidates that are not
  /// exploration (the start; an exploration candidate's steps all count as exploration already).
  double profiling_overhead_seconds() const;
  /// The device kinds ("cpu", "cuda") some op of the graph has a measured profile for.
  std::set<std::string> profiled_kinds() const;
  /// Summary for `placementctl jobs`.
  placement::messages::JobSummary summary() const;
  /// summary() plus per-candidate detail, for `placementctl jobs show`.
  placement::messages::JobInfo detail() const;

  /// Each re-exploration adds candidates, and a job's own reported times start one: past this
  /// many, a drift only takes a new reference, so a session's candidates stay bounded.
  static constexpr uint64_t kMaxReexplorations = 64;

 private:
  /// The state machine's steps (exploration.cpp).
  struct Machine;
  /// The next candidate (candidates.cpp, which says where candidates come from).
  std::optional<Proposal> propose();
  /// What ranks the policy's samples ([policy] screened_samples), if anything does.
  const sim::Simulator* ranking_model() const;

  const uint64_t id_;
  const JobIdentity job_;
  const EffectivePolicy policy_;
  const std::chrono::system_clock::time_point attached_at_;
  const std::chrono::steady_clock::time_point attached_steady_;
  /// Set when the session ends (attached_s then stops growing).
  std::optional<std::chrono::steady_clock::time_point> detached_steady_;
  SessionState state_ = SessionState::kAttached;
  /// The state the job was in when it detached (what it ended on: exploring, or done).
  SessionState state_at_detach_ = SessionState::kAttached;

  std::optional<placement::OpGraph> graph_;
  std::string fingerprint_;
  std::unique_ptr<placement::Grouper> grouper_;
  std::unique_ptr<placement::Placer> placer_;
  std::unique_ptr<placement::Algorithm> algorithm_;
  /// Grouper → placer over `graph_` and the job's devices (which it refers to): draws the
  /// candidates and holds the policy the algorithm trains.
  std::unique_ptr<PolicyPipeline> pipeline_;
  std::mt19937_64 rng_;
  /// The best placement this uid's earlier runs stored for this (graph, devices): the first
  /// candidate after the job's own start, kept only if a trial shows it faster.
  std::optional<placement::Placement> cached_;
  /// The placement the job runs when it attaches (all on its first device unless it says).
  std::optional<placement::Placement> job_start_;
  /// Memory model for pre-screening candidates (built from the graph and devices).
  std::optional<sim::Simulator> memory_model_;
  std::optional<offline::ImitationResult> warm_start_;
  /// The warm start is configured, the policy was not resumed, and it has not run yet: it waits
  /// for the job's profiles of every device kind (the simulator needs them), at most until the
  /// policy's first sample.
  bool warm_start_pending_ = false;
  /// The heuristics' placements still to offer, fastest on the planning model first, then the
  /// answer's swapped copies (plan_relabelings), and what became of each. None is the policy's
  /// sample, so none trains it directly (as all on one device does not): REINFORCE's gradient for
  /// an action the policy did not draw is large and points anywhere, and with it the
  /// online-learning bench's medians fell in four of five scenarios (docs/benchmarks.md); a policy
  /// sample that repeats one is scored by its measurement.
  HeuristicQueue heuristics_;
  /// The latest refit's search (run_refit), whether its answer was offered, and how many
  /// measured placements the next refit waits for.
  std::optional<offline::ImitationResult> refit_;
  /// The latest refit's model: it ranks the policy's samples ([policy] screened_samples).
  std::optional<sim::Simulator> refitted_model_;
  /// Whether the planning model failed to time a sample (the samples run as drawn since).
  bool ranking_failed_ = false;
  bool refit_tried_ = true;
  size_t next_refit_at_ = kFirstRefitAt;
  /// Each refit as inspection shows it (JobInfo::refits).
  std::vector<nlohmann::json> refits_;

  SessionCounters counters_;
  std::map<uint64_t, CandidateRecord> candidates_;
  uint64_t current_candidate_ = 0;
  uint64_t incumbent_ = 0;
  /// What exploration may cost, against the placement in force's recent step time (refreshed
  /// after each policy advance).
  ExplorationBudget budget_;
  bool paused_ = false;
  /// Whether the stored placement, all on one device and the warm start's placement (its
  /// policy's mode) were offered as candidates (each once).
  bool cached_tried_ = false;
  bool single_device_tried_ = false;
  /// Placements a directive asked the job to profile, until a report answers (directive() keeps
  /// it, as it decides whether to ask).
  mutable std::set<uint64_t> profiles_asked_;
  bool warm_start_tried_ = false;
  /// Candidates in a row that no trial showed faster than the incumbent.
  int64_t since_improvement_ = 0;
  /// Whether the placement in force has drifted while the job exploits it.
  DriftWatch drift_;
  int64_t reexplore_left_ = 0;
  std::optional<uint64_t> advance_due_after_;
  /// Set when plugin code threw (what and where): exploration ended for good, the job runs its
  /// best (or start) placement, and the policy's state is no longer saved.
  std::string policy_error_;
  /// The A/B trial running (its windows alternate incumbent and challenger), and each arm's failed
  /// steps when it began (a failure before the trial is not the trial's).
  std::optional<Trial> trial_;
  std::array<uint64_t, 2> trial_failures_{};
  /// Why exploration ended, while refinement and the final check (the start against the choice)
  /// run.
  std::string finishing_;
  /// Where refinement stands (ExplorationConfig::refine_contenders).
  Refinement refinement_;
  /// Steps still to discard as warm-up after the latest swap (to current_candidate_).
  int64_t warmup_left_ = 0;
  /// Steps run under current_candidate_ since it was issued for screening (warm-up included).
  int64_t screen_steps_ = 0;
  /// A follower's latest steps.
  std::deque<double> follower_step_times_;
  Timeline timeline_;
};

}  // namespace placementd
