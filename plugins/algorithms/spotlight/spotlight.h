#pragma once

#include <cstdint>

#include "policy_gradient.h"

namespace placement::plugins {

struct SpotlightOptions {
  double kl_weight = 1.0;     // Spotlight Alg. 1: β = 1
  int64_t ascent_steps = 10;  // Spotlight Alg. 1: 10 ascent steps per iteration
  int64_t samples_per_iteration = 10;
  double entropy_weight = 0.0;
  double learning_rate = 0.01;
  double clip_norm = 1.0;
  double baseline_decay = 0.95;
};

/// Spotlight (Gao et al., ICML'18, Alg. 1): a proximal policy step that maximises the importance-
/// weighted advantage minus β·KL(π_old ‖ π), with several ascent steps per batch of samples.
class Spotlight : public BatchedPolicyGradient {
 public:
  explicit Spotlight(const SpotlightOptions& options)
      : BatchedPolicyGradient(options.samples_per_iteration, options.baseline_decay),
        options_(options) {}

  /// KL(π_old ‖ π) estimated before the last ascent step of the last iteration.
  double last_kl() const { return last_kl_; }

 protected:
  void update(const SampleBatch& batch) override;

 private:
  SpotlightOptions options_;
  double last_kl_ = 0.0;
};

}  // namespace placement::plugins
