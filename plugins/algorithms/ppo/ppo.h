#pragma once

#include <cstdint>

#include "policy_gradient.h"

namespace placement::plugins {

using PpoOptions = PpoSettings;

/// PPO with the clipped surrogate (EAGLE): every `minibatch` samples, `epochs` ascent steps on
/// mean(min(rA, clip(r, 1±ε)A)) + βH with EMA-baseline advantages.
class Ppo : public BatchedPolicyGradient {
 public:
  explicit Ppo(const PpoOptions& options)
      : BatchedPolicyGradient(options.minibatch, options.baseline_decay), options_(options) {}

  /// Samples whose ratio hit the clip, summed over all epochs so far (a health figure for logs).
  uint64_t clipped() const { return clipped_; }

 protected:
  void update(const SampleBatch& batch) override;

 private:
  PpoOptions options_;
  uint64_t clipped_ = 0;
};

}  // namespace placement::plugins
