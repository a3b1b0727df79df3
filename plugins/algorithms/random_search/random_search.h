#pragma once

#include "placement/algorithm.h"

namespace placement::plugins {

/// The control every learning curve is judged against: never updates the policy, so candidates
/// are independent draws from the placer's initial distribution (close to uniform for the learned
/// placers, whose logits start small), and the session keeps the best one it measured.
class RandomSearch : public Algorithm {
 public:
  void reset(const AlgorithmContext&) override { stats_ = AlgorithmStats{}; }
  void observe(const Action&, double reward, bool valid) override;
  AlgorithmStats stats() const override { return stats_; }

 private:
  AlgorithmStats stats_;
  bool any_valid_ = false;
};

}  // namespace placement::plugins
