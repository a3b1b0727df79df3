#pragma once
// The replies to placementctl's inspection requests (status, list_jobs, job_show, list_plugins):
// what the daemon reports about itself, its jobs and its plugins. Decoding ignores keys it does
// not know, so an older placementctl reads a newer daemon's replies; a known key of the wrong
// type is an error that names it.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/messages.h"

namespace placement::messages {

struct StatusReply {
  static constexpr MessageType kType = MessageType::kStatusReply;
  static constexpr uint16_t kSince = 1;
  struct PluginCounts {
    uint64_t grouper = 0, placer = 0, algorithm = 0;
  };
  struct Triple {
    std::string grouper, placer, algorithm;
  };
  std::string version;
  int64_t pid = 0;
  double uptime_s = 0;
  std::string config, socket, state_dir;
  /// Store writes that failed since start (the daemon's log says which).
  uint64_t store_failed_writes = 0;
  /// The asker's jobs; every job only for an admin (nullopt otherwise).
  uint64_t jobs_visible = 0;
  std::optional<uint64_t> jobs_total;
  uint64_t connections = 0, connections_total = 0;
  uint64_t frames_received = 0, reports_received = 0, protocol_errors = 0;
  PluginCounts plugins;
  uint64_t plugins_skipped = 0;
  /// The config's default grouper / placer / algorithm.
  Triple policy;
  /// Who asked, as the daemon saw it.
  struct Peer {
    uint64_t uid = 0;
    bool admin = false;
  };
  Peer peer;
  nlohmann::json to_json() const;
  static StatusReply from_json(const nlohmann::json& body);
};

/// One job, as `placementctl jobs` lists it. Times in seconds; nullopt until measured.
struct JobSummary {
  uint64_t id = 0;
  std::string name;
  uint64_t uid = 0;
  int64_t pid = 0;
  JobState state = JobState::kAttached;
  std::string fingerprint;
  uint64_t ops = 0;
  int64_t groups = 0;
  uint64_t devices = 0;
  std::string grouper, placer, algorithm;
  uint64_t steps = 0, failed_steps = 0;
  uint64_t candidates_tried = 0;
  int64_t max_candidates = 0;
  std::optional<double> start_step_time_s, current_step_time_s, best_step_time_s;
  /// 95% confidence intervals of the start's and the best's median step times ([low, high];
  /// nullopt until 6 steps are measured).
  std::optional<std::array<double, 2>> start_step_time_interval_s, best_step_time_interval_s;
  /// What exploration and profiling cost beyond the placement in force at the time, over the
  /// time measured: the measure max_overhead_fraction bounds, not what the job lost (a candidate
  /// faster than the placement in force earns time back before a trial shows it; see
  /// beyond_best_s).
  double exploration_overhead = 0;
  /// The time of every step the job reported (failed and profiled ones too).
  double job_s = 0;
  /// What placementd gained the job so far, exploration and all: the start's mean step time × the
  /// batches the job trained (its steps less the failed ones, which it ran again) over job_s, and
  /// a 95% interval from the start mean's. nullopt until the start is measured.
  std::optional<double> realized_speedup;
  std::optional<std::array<double, 2>> realized_speedup_interval;
  /// The start's mean step time, the realized speed-up's reference.
  std::optional<double> start_mean_step_time_s;
  /// Seconds the steps run on other placements than the best known took beyond the best's mean
  /// step time (failed steps whole; below 0 when they were faster on the whole). nullopt until the
  /// best is measured.
  std::optional<double> beyond_best_s;
  /// The placement the job runs now (at detach: what it ended on), the best known (the placement in
  /// force, which only a trial changes; 0 before it is measured), and whether they are the same.
  uint64_t current_placement = 0, best_placement = 0;
  bool on_best = false;
  /// Exploration has ended (its candidates, convergence or budget) and the job runs the best for
  /// good; at detach, whether it had.
  bool exploration_finished = false;
  uint64_t exploration_steps = 0, expected_steps = 0;
  /// Fraction of the exploration budget spent, 0 to 1.
  double budget_used = 0;
  /// Exploiting until the job's pace allows more exploration (jobs of unknown length).
  bool paused = false;
  /// Start over best step time.
  std::optional<double> speedup;
  /// When the search first got within 2% of its best.
  std::optional<uint64_t> steps_to_within_2pct;
  std::optional<double> seconds_to_within_2pct;
  uint64_t rejected = 0, repeats_scored = 0, reexplorations = 0;
  std::vector<std::string> profiled_kinds;
  uint64_t profiled_steps = 0;
  double profiling_overhead_s = 0;
  /// What a plugin threw, when it ended the job's exploration.
  std::optional<std::string> policy_error;
  double attached_s = 0;
  /// Protocol 4: the job is one replica of a data-parallel group (a follower when rank > 0).
  std::optional<ReplicaInfo> replica;
  nlohmann::json to_json() const;
  static JobSummary from_json(const nlohmann::json& body);
};

struct JobList {
  static constexpr MessageType kType = MessageType::kJobList;
  static constexpr uint16_t kSince = 1;
  std::vector<JobSummary> jobs;
  nlohmann::json to_json() const;
  static JobList from_json(const nlohmann::json& body);
};

/// One placement a job ran, as `placementctl jobs show` lists it.
struct CandidateInfo {
  uint64_t id = 0;
  Reason reason = Reason::kStart;
  /// Measured before a re-exploration: no longer compared.
  bool stale = false;
  std::string placement_fingerprint;
  std::vector<int64_t> ops_per_device;
  uint64_t steps = 0, failures = 0;
  std::optional<std::string> error;
  std::optional<double> median_step_time_s;
  /// Per device, the most it held in the forward and backward of the job's profiled steps under
  /// this placement, as the job measured it (ProfileReport::peak_bytes); empty when none was.
  std::vector<uint64_t> peak_bytes;
  /// Per device, what lived there by kind under this placement (ProfileReport::held_bytes); empty
  /// when the job measured none.
  std::vector<HeldBytes> held_bytes;
  /// How its A/B trial against the placement in force ended, in words, e.g. "faster than 1:
  /// -4.1% (-6.0% to -2.2%), 64 pairs"; nullopt when it had none.
  std::optional<std::string> trial;
  nlohmann::json to_json() const;
  static CandidateInfo from_json(const nlohmann::json& body);
};

/// Consecutive steps of a job under one placement, for `placementctl jobs show --plot`. A long
/// job's timeline stays within TimelinePoint::kMaxPoints: neighbours merge, two steps then four
/// and so on a point, and a point that merged two placements has placement 0.
struct TimelinePoint {
  static constexpr size_t kMaxPoints = 2048;
  /// The job's step count before its first step, and how many steps it holds.
  uint64_t first_step = 0, steps = 0;
  /// The placement that ran them (0: more than one), and the placement in force (the best known,
  /// which only a trial changes) meanwhile.
  uint64_t placement = 0, best = 0;
  double mean_step_time_s = 0;
  nlohmann::json to_json() const;
  static TimelinePoint from_json(const nlohmann::json& body);
};

/// Where an A/B trial ended, for the plot: the candidate, what it was compared with (the start in
/// a final check), the verdict ("faster", "not faster", "unclear", "faster by its estimate") and
/// the job's step count then.
struct TrialMark {
  uint64_t candidate = 0, against = 0, step = 0;
  std::string verdict;
  bool final_check = false;
  nlohmann::json to_json() const;
  static TrialMark from_json(const nlohmann::json& body);
};

/// A job in full: its summary (the same keys, at the top level) and what it ran.
struct JobInfo {
  static constexpr MessageType kType = MessageType::kJobInfo;
  static constexpr uint16_t kSince = 1;
  JobSummary job;
  std::vector<CandidateInfo> candidates;
  /// Names of the job's devices, in the order ops_per_device counts them.
  std::vector<std::string> device_names;
  uint64_t stray_reports = 0, profile_reports = 0;
  /// Profile reports no directive asked for, dropped unread.
  uint64_t profile_reports_dropped = 0;
  /// Policy samples the memory model rejected, by the device that would not fit.
  std::map<std::string, uint64_t> rejected_by_device;
  /// The warm start's report as the planning library writes it (docs/learning.md); null when
  /// none ran.
  nlohmann::json warm_start;
  /// Each refit of the planning model to the job's measured steps, in order (docs/live.md):
  /// {measured, log_error_before, log_error_after, fit_timed_out, factors: [{what, scale}], shared:
  /// ["cuda:0 and cuda:1", devices found to take turns], and
  /// the warm start's report of its search, `skipped` saying why its answer was not offered}, or
  /// {measured, skipped} when the fit itself failed; older daemons send none.
  std::vector<nlohmann::json> refits;
  /// What ran when, step by step, and where each trial ended (older daemons send neither).
  std::vector<TimelinePoint> timeline;
  std::vector<TrialMark> trials;
  nlohmann::json to_json() const;
  static JobInfo from_json(const nlohmann::json& body);
};

struct PluginList {
  static constexpr MessageType kType = MessageType::kPluginList;
  static constexpr uint16_t kSince = 1;
  /// A hyperparameter as a plugin declares it; the default as TOML writes it.
  struct Parameter {
    std::string name, type, default_value, summary;
    std::optional<double> min, max;
    std::vector<std::string> choices;
  };
  struct Plugin {
    std::string name, kind, version, summary, file, torch_version;
    std::vector<Parameter> hyperparameters;
  };
  struct Skipped {
    std::string file, reason;
  };
  std::vector<Plugin> plugins;
  std::vector<Skipped> skipped;
  nlohmann::json to_json() const;
  static PluginList from_json(const nlohmann::json& body);
};

}  // namespace placement::messages
