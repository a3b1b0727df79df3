#pragma once

#include "partition_placer.h"

namespace placement::plugins {

/// The Scotch baseline of the Hierarchical Planner: Scotch's static mapping of the group graph onto
/// the job's device topology — every device, the CPU included, with work in proportion to each
/// device's speed and traffic charged by how long its link takes. Deterministic for a seed.
class ScotchPlacer : public PartitionPlacer {
 public:
  using PartitionPlacer::PartitionPlacer;
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
