#pragma once

#include "partition_placer.h"

namespace placement::plugins {

/// The METIS baseline of the Hierarchical Planner and EAGLE: a k-way min-cut of the group graph
/// (groups weighted by their ops' compute time, links by the bytes between them) into one part per
/// device. Deterministic for a seed.
class MetisPlacer : public PartitionPlacer {
 public:
  using PartitionPlacer::PartitionPlacer;
  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
