#pragma once
// Warm start (issue #4, "better than the papers"): before a policy samples anything, teach it a
// baseline's placement by supervised steps, so its first candidates are as good as a good heuristic
// instead of uniform noise; the simulator (optimize) or live steps then improve on it. The baseline
// "simulator" is a search instead of a heuristic: simulated annealing against the simulator (the
// planning model) from the best heuristic placement, whose answer the policy then imitates.

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/placement.h"
#include "placement/policy.h"
#include "planning/sim/annealing.h"
#include "planning/sim/simulator.h"
#include "plugins/plugin_registry.h"

namespace placementd::offline {

/// The warm start that searches the simulator instead of running one baseline placer.
inline constexpr const char* kSimulatorWarmStart = "simulator";
/// The heuristics the simulator search may start from (the best valid one on the model is used).
inline const std::vector<std::string> kSearchStarts = {"list_scheduling", "metis", "expert",
                                                       "single_device"};

struct ImitationOptions {
  /// Baseline placer whose placement the policy learns, or kSimulatorWarmStart ("" = no imitation).
  std::string baseline;
  /// The simulator search (kSimulatorWarmStart only).
  sim::AnnealOptions search;
  /// One more place the search may start from, named: a placement known to be good (a device per
  /// group), taken when the model predicts it faster than every heuristic's. Ignored when the
  /// model rejects it.
  std::optional<std::pair<std::string, std::vector<int>>> search_from;
  /// When it says the target placement is not worth imitating (a live session's refit: it ran
  /// already), the result is skipped with `why_skipped` and the policy is left as it was.
  std::function<bool(const placement::Placement&)> skip_target;
  std::string why_skipped;
  /// The search also times each placement on this many copies of its model, each off by a
  /// log-normal `search_ensemble_sigma` (sim::with_model_error), and minimises the mean: a
  /// placement that is only fast where the model is wrong is not what it wants. 0: the model alone.
  int64_t search_ensemble = 4;
  double search_ensemble_sigma = 0.2;
  /// Supervised steps at most.
  int64_t max_steps = 200;
  /// Adam step size of the supervised steps (the algorithms' own rates are for noisy rewards).
  double learning_rate = 0.05;
  /// Stop once the policy gives each group the baseline's device with this probability on average
  /// (geometric mean over groups).
  double target_probability = 0.9;
};

struct ImitationResult {
  std::string baseline;
  /// The imitated action (the grouping first, for a learned grouper's joint policy), and its
  /// placement's simulated step time (on the simulator the warm start was given).
  placement::Action action;
  /// The same as a placement of the ops (pins enforced): the warm-started policy's first candidate.
  placement::Placement placement;
  std::optional<double> baseline_step_time_s;
  /// The simulator search: the heuristic it started from, that start's step time, placements
  /// simulated.
  std::string search_start;
  std::optional<double> search_start_step_time_s;
  int64_t search_evaluations = 0;
  /// Model copies each placement was also timed on (ImitationOptions::search_ensemble).
  int64_t search_ensemble = 0;
  int64_t steps = 0;
  /// Geometric-mean probability per group of the baseline's device, before and after.
  double probability_before = 0.0;
  double probability_after = 0.0;
  /// Why nothing was imitated (no trainable policy, baseline not loaded, out of memory ...); empty
  /// when it was.
  std::string skipped;
};

/// {baseline, baseline_step_time_s, steps, probability_before, probability_after, skipped}, and
/// {search_start, search_start_step_time_s, search_evaluations, search_ensemble} after a simulator
/// search; the optional ones are null when absent (placementctl optimize --json, jobs show).
nlohmann::json to_json(const ImitationResult& result);

/// Cross-entropy steps raising log π(target) until the per-group probability reaches
/// options.target_probability or options.max_steps were taken. Sets `result`'s action, steps and
/// probabilities (what is known of the target already stays).
void imitate(placement::TrainablePolicy& policy, const std::vector<int>& target,
             const ImitationOptions& options, ImitationResult& result);

/// Places `grouping` with the baseline placer named in `options` (or searches `simulator` for it,
/// with kSimulatorWarmStart), checks the placement against the simulator's memory model, and has
/// `policy` imitate it. Never throws for a baseline that cannot be used: the result says why it was
/// skipped (a simulator search needs a graph profiled for the devices it may use).
/// `prefix` goes before the baseline's devices in the imitated action (the grouping, when the
/// policy is a learned grouper's and placer's joint one; empty otherwise). `simulator` is the model
/// the baseline or the search plans on; a baseline's placement is timed on `judge` when given (as
/// place_baseline does), a search's times are the model's.
ImitationResult imitate_baseline(placement::TrainablePolicy* policy,
                                 const sim::Simulator& simulator, const PluginRegistry& registry,
                                 const placement::Grouping& grouping,
                                 const ImitationOptions& options, uint64_t seed,
                                 const placement::Action& prefix = {},
                                 const sim::Simulator* judge = nullptr);

}  // namespace placementd::offline
