#pragma once

#include <vector>

#include "placement/placer.h"

namespace placement::plugins {

struct ListSchedulingOptions {
  /// Optimizer bytes per parameter byte in the memory need (Adam: 2).
  double optimizer_state_factor = 2.0;
  /// Fraction of each device's memory kept free.
  double headroom = 0.1;
};

/// Earliest-finish-time list scheduling with memory as a hard constraint, in the spirit of Baechi's
/// m-ETF (Jeon et al., SoCC'20), at group granularity: groups are taken in the order their first
/// op appears in a topological order of the graph, and each goes to the device on which it would
/// finish earliest (its inputs' arrival over the links, the device's queue, its compute time there)
/// among the devices that still have memory for it. Deterministic; no trainable policy.
class ListSchedulingPlacer : public Placer {
 public:
  explicit ListSchedulingPlacer(const ListSchedulingOptions& options)
      : optimizer_state_factor_(options.optimizer_state_factor), headroom_(options.headroom) {}

  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
  std::vector<int> place(std::mt19937_64& /*rng*/) override { return device_of_group_; }

 private:
  double optimizer_state_factor_;
  double headroom_;
  std::vector<int> device_of_group_;
};

}  // namespace placement::plugins
