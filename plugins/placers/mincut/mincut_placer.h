#pragma once

#include <cstdint>

#include "partition_placer.h"

namespace placement::plugins {

struct MincutOptions {
  double imbalance = 0.05;
  int64_t seed = 1;
};

/// The MinCut baseline of the Hierarchical Planner: Scotch over the GPUs only, as a plain balanced
/// min-cut — equal shares per GPU and every link alike, so only the bytes cut count. Falls back to
/// all devices on a job without GPUs. Deterministic for a seed.
class MincutPlacer : public PartitionPlacer {
 public:
  explicit MincutPlacer(const MincutOptions& options)
      : PartitionPlacer(/*gpus_only=*/true, options.imbalance, options.seed) {}
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
