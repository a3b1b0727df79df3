#pragma once

#include <cstdint>
#include <vector>

#include "placement/placer.h"

namespace placement::plugins {

/// The METIS baseline of the Hierarchical Planner and EAGLE: a k-way min-cut of the group graph
/// (groups weighted by their ops' compute time, links by the bytes between them) into one part per
/// device. Deterministic for a seed; no trainable policy.
class MetisPlacer : public Placer {
 public:
  MetisPlacer(bool gpus_only, double imbalance, int64_t seed) : gpus_only_(gpus_only), imbalance_(imbalance), seed_(seed) {}

  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
  std::vector<int> place(std::mt19937_64& /*rng*/) override { return device_of_group_; }

 private:
  bool gpus_only_;
  double imbalance_;
  int64_t seed_;
  std::vector<int> device_of_group_;
};

}  // namespace placement::plugins
