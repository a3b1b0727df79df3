#pragma once

#include <cstdint>

#include "partition_placer.h"

namespace placement::plugins {

struct ScotchPlacerOptions {
  bool gpus_only = false;  // the HP paper's Scotch maps onto every device
  double imbalance = 0.05;
  int64_t seed = 1;
};

/// The Scotch baseline of the Hierarchical Planner: Scotch's static mapping of the group graph onto
/// the job's device topology — every device, the CPU included, with work in proportion to each
/// device's speed and traffic charged by how long its link takes. Deterministic for a seed.
class ScotchPlacer : public PartitionPlacer {
 public:
  explicit ScotchPlacer(const ScotchPlacerOptions& options)
      : PartitionPlacer(options.gpus_only, options.imbalance, options.seed) {}
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
