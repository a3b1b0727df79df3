#pragma once

#include <cstdint>
#include <vector>

#include "placement/algorithm.h"

namespace placement::plugins {

struct ReinforceOptions {
  double learning_rate = 0.1;      // HP §3: Adam, lr 0.1
  double clip_norm = 1.0;          // HP §3: gradient clipping of norm 1.0
  double baseline_decay = 0.95;    // EMA of the reward (ColocRL §3.2, HP §2)
  int64_t samples_per_update = 4;  // HP: k = 4 placer samples per update
  int64_t valid_only_after = 500;  // HP §3: update only on valid placements after 500 steps
  double entropy_weight = 0.0;
};

/// REINFORCE with an exponential-moving-average baseline (ColocRL, Hierarchical Planner).
/// Every `samples_per_update` samples the policy ascends Σᵢ (Rᵢ − B)/k · ∇log π(aᵢ); B starts at
/// the failing reward and then tracks the rewards. After `valid_only_after` samples, invalid
/// placements are left out of both the update and the baseline, so the policy does not converge
/// towards the failing reward (HP §3).
class Reinforce : public Algorithm {
 public:
  explicit Reinforce(const ReinforceOptions& options) : options_(options) {}

  void reset(const AlgorithmContext& context) override;
  void observe(const Action& action, double reward, bool valid) override;
  AlgorithmStats stats() const override { return stats_; }

 private:
  ReinforceOptions options_;
  AlgorithmContext context_;
  AlgorithmStats stats_;
  std::vector<Action> actions_;
  std::vector<double> rewards_;
};

}  // namespace placement::plugins
