#pragma once
// Plugin interface: turns rewards of evaluated samples into policy updates.

#include <cstdint>
#include <string>

#include "placement/policy.h"

namespace placement {

struct AlgorithmContext {
  /// The policy to train; nullptr when grouper and placer are deterministic (then the algorithm
  /// only keeps statistics).
  TrainablePolicy* policy = nullptr;
  /// The reward an invalid or failing placement gets (config: exploration.failing_reward).
  double failing_reward = -10.0;
};

struct AlgorithmStats {
  uint64_t samples = 0;
  uint64_t updates = 0;
  /// The algorithm's current reward baseline, if it keeps one.
  double baseline = 0.0;
};

/// A learning algorithm. Not thread-safe: one session drives it.
class Algorithm {
 public:
  virtual ~Algorithm();

  /// Starts (or restarts) learning for a policy. Called before observe().
  virtual void reset(const AlgorithmContext& context) = 0;

  /// Reports one evaluated sample: the policy's action and its reward (−√step time, or the failing
  /// reward with valid=false). The algorithm decides when to update the policy.
  virtual void observe(const Action& action, double reward, bool valid) = 0;

  virtual AlgorithmStats stats() const = 0;
};

}  // namespace placement
