#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "policy_gradient.h"

namespace placement::plugins {

struct PostOptions {
  PpoSettings ppo;
  // Cross-entropy part (Post §3): after every `elite_window` samples, raise log π of the best
  // `elite_count` valid ones.
  int64_t elite_window = 50;
  int64_t elite_count = 5;
  double cross_entropy_weight = 1.0;
};

/// Post (Gao et al., NeurIPS'18): PPO between periodic cross-entropy minimisation towards the elite
/// placements of the last window.
class Post : public BatchedPolicyGradient {
 public:
  explicit Post(const PostOptions& options)
      : BatchedPolicyGradient(options.ppo.minibatch, options.ppo.baseline_decay),
        options_(options) {}

  uint64_t cross_entropy_steps() const { return cross_entropy_steps_; }

 protected:
  void update(const SampleBatch& batch) override {
    ppo_iteration(*context().policy, batch, options_.ppo);
  }
  void on_sample(const Action& action, double reward, bool valid) override;

 private:
  PostOptions options_;
  std::vector<std::pair<double, Action>> window_;
  int64_t window_samples_ = 0;
  uint64_t cross_entropy_steps_ = 0;
};

}  // namespace placement::plugins
