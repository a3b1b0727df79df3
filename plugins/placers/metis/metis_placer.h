#pragma once

#include <cstdint>

#include "partition_placer.h"

namespace placement::plugins {

struct MetisPlacerOptions {
  bool gpus_only = true;  // as in the papers
  double imbalance = 0.03;
  int64_t seed = 1;
};

/// The METIS baseline of the Hierarchical Planner and EAGLE: a k-way min-cut of the group graph
/// (groups weighted by their ops' compute time, links by the bytes between them) into one part per
/// device. Deterministic for a seed.
class MetisPlacer : public PartitionPlacer {
 public:
  explicit MetisPlacer(const MetisPlacerOptions& options)
      : PartitionPlacer(options.gpus_only, options.imbalance, options.seed) {}
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
