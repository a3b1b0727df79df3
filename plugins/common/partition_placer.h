#pragma once
// The partitioning baselines (metis, scotch, mincut) share their knobs and their fixed answer.
// Header-only: plugins never load one another.

#include <cstdint>
#include <random>
#include <vector>

#include "placement/placer.h"

namespace placement::plugins {

/// A deterministic placer that cuts the group graph once in prepare() and returns that cut from
/// every place(); no trainable policy.
class PartitionPlacer : public Placer {
 public:
  PartitionPlacer(bool gpus_only, double imbalance, int64_t seed)
      : gpus_only_(gpus_only), imbalance_(imbalance), seed_(seed) {}

  std::vector<int> place(std::mt19937_64& /*rng*/) override { return device_of_group_; }

 protected:
  /// Partition over CUDA devices only when the job has any.
  bool gpus_only_;
  /// Allowed load imbalance, relative.
  double imbalance_;
  /// The partitioner's random seed.
  int64_t seed_;
  std::vector<int> device_of_group_;
};

}  // namespace placement::plugins
