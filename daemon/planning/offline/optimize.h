#pragma once
// Offline optimisation: the live session's grouper → placer → algorithm loop, run against the
// simulator with measurement noise instead of a real job (placementctl optimize, warm starts,
// learning tests and the papers' benchmark).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "placement/params.h"
#include "placement/placement.h"
#include "planning/group_cap.h"
#include "planning/offline/warm_start.h"
#include "planning/sim/simulator.h"
#include "plugins/plugin_registry.h"

namespace placementd::offline {

struct PluginChoice {
  std::string name;
  placement::Params params;
};

struct OptimizeOptions {
  // The triple a job gets from the default config ([policy]), so optimize previews it.
  PluginChoice grouper{"colocation", {}};
  PluginChoice placer{"feedforward", {}};
  PluginChoice algorithm{"reinforce", {}};
  /// The most groups the placer is given ([policy] max_groups; planning/group_cap.h).
  int max_groups = kDefaultMaxGroups;
  /// Candidate placements to evaluate (the policy's samples; memory-rejected ones included).
  int64_t budget = 500;
  uint64_t seed = 1;
  /// Relative standard deviation of the simulated "measurement": measured = t·(1 + noise·N(0, 1)).
  double noise = 0.02;
  double failing_reward = -10.0;
  /// Deterministic placers evaluated next to the policy; the ones not loaded are left out.
  std::vector<std::string> baselines = {"single_device", "expert", "metis",
                                        "scotch",        "mincut", "list_scheduling"};
  /// Warm start: the policy first imitates this baseline's placement (imitation.baseline empty:
  /// no), which is then its first candidate.
  ImitationOptions imitation;
  /// Every planner — the warm start (its search, or the baseline it imitates) and the baseline
  /// placers — plans on a model whose op times and link bandwidths are off by this log-normal
  /// sigma (sim::with_model_error), as a profile-based model is off from a real job; the truth (the
  /// graph's own profiles) only times the placements they choose, and the policy's candidates. 0
  /// lets every planner see the truth.
  double model_error = 0.2;
  /// How the policy's best is chosen among its noisy measurements: kModelAssisted shrinks each
  /// measurement toward the planners' model as far as the model has proven reliable
  /// (sim::ModelAssistedSelection); kMeasured takes the lowest measurement, which with many
  /// near-equal candidates is the luckiest one rather than the fastest.
  enum class Selection { kModelAssisted, kMeasured };
  Selection selection = Selection::kModelAssisted;
  /// Called after every evaluation: (done, budget, best simulated step time so far or nullopt).
  std::function<void(int64_t, int64_t, std::optional<double>)> progress;
};

/// One evaluated candidate.
struct Evaluation {
  bool valid = false;
  /// Simulated step time; nullopt for a candidate the memory model rejected.
  std::optional<double> step_time_s;
  /// What the algorithm was told it measured (noisy), nullopt when rejected.
  std::optional<double> measured_s;
  /// Best simulated step time among the policy's candidates so far (nullopt while none was valid).
  std::optional<double> best_so_far_s;
};

struct OptimizeResult {
  std::vector<Evaluation> curve;
  /// The final answer: the best of the policy's candidates and of every valid baseline.
  placement::Placement best;
  double best_step_time_s = 0.0;
  /// "policy" or "baseline:<name>".
  std::string best_source;
  /// Simulated step time of the policy's own candidate chosen as its best (nullopt if none was
  /// valid).
  std::optional<double> policy_best_s;
  /// The planners' model's relative error as the selection estimated it from the measurements
  /// among its contenders (kModelAssisted; nullopt when it had too few, and for kMeasured).
  std::optional<double> estimated_model_error;
  /// Baseline name → simulated step time (nullopt where it is invalid or the placer refused).
  std::map<std::string, std::optional<double>> baselines;
  /// Why a baseline has no time: out of memory (with device and bytes), unprofiled, or its error.
  std::map<std::string, std::string> baseline_errors;
  double lower_bound_s = 0.0;
  int64_t evaluations = 0;
  /// First evaluation (1-based) whose best-so-far is within 2% of the policy's final best.
  std::optional<int64_t> evaluations_to_within_2pct;
  /// Candidates rejected before being "run": out of memory (counted per device at fault) or an op
  /// on a device kind it has no profile for (counted as "unprofiled device kind").
  int64_t invalid_rejected = 0;
  std::map<std::string, int64_t> invalid_by_device;
  int num_groups = 0;
  /// What the warm start did, when one was asked for.
  std::optional<ImitationResult> imitation;
  double wall_s = 0.0;
};

/// OptimizeOptions::Selection by its name on command lines: "model", "measured".
const std::map<std::string, OptimizeOptions::Selection>& selection_names();
/// The name of a selection, as selection_names() spells it.
std::string name_of(OptimizeOptions::Selection selection);

/// Runs the loop. Throws PluginError for unknown plugins or bad parameters, std::invalid_argument
/// for problems the plugins or the simulator report. Deterministic for a given seed.
OptimizeResult optimize(const sim::Simulator& simulator, const PluginRegistry& registry,
                        const OptimizeOptions& options);

}  // namespace placementd::offline
