#include "config/exploration_keys.h"

namespace placementd {

const std::vector<ExplorationKey>& exploration_keys() {
  using E = ExplorationConfig;
  static const std::vector<ExplorationKey> keys = {
      {"steps_per_candidate", &E::steps_per_candidate, 2, 100000},
      {"warmup_steps", &E::warmup_steps, 0, 100000},
      {"max_candidates", &E::max_candidates, 0, 10000000},
      {"max_overhead_fraction", &E::max_overhead_fraction, 0.0, 1.0},
      {"failing_reward", &E::failing_reward, -1e9, 0.0},
      {"drift_threshold", &E::drift_threshold, 0.0, 100.0},
      {"drift_steps", &E::drift_steps, 1, 10000000},
      {"converge_candidates", &E::converge_candidates, 0, 10000000},
      {"trial_window_steps", &E::trial_window_steps, 1, 100000},
      {"max_trial_steps", &E::max_trial_steps, 16, 100000000},
      {"confidence", &E::confidence, 0.5, 0.9999},
      {"min_gain", &E::min_gain, 0.0, 1.0},
  };
  return keys;
}

bool set_exploration_key(ExplorationConfig& e, const std::string& name, double value) {
  for (const ExplorationKey& k : exploration_keys()) {
    if (name != k.name) continue;
    if (const auto* integer = std::get_if<int64_t ExplorationConfig::*>(&k.field))
      e.** integer = static_cast<int64_t>(value);
    else
      e.*std::get<double ExplorationConfig::*>(k.field) = value;
    return true;
  }
  return false;
}

}  // namespace placementd
