#pragma once

#include "partition_placer.h"

namespace placement::plugins {

/// The MinCut baseline of the Hierarchical Planner: Scotch over the GPUs only, as a plain balanced
/// min-cut — equal shares per GPU and every link alike, so only the bytes cut count. Falls back to
/// all devices on a job without GPUs. Deterministic for a seed.
class MincutPlacer : public PartitionPlacer {
 public:
  MincutPlacer(double imbalance, int64_t seed) : PartitionPlacer(/*gpus_only=*/true, imbalance, seed) {}
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
