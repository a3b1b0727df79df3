#pragma once
// One deterministic baseline placer run on a grouping and judged by the simulator: what optimize
// reports next to the policy, and what the warm starts imitate or search from.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "placement/placement.h"
#include "planning/sim/simulator.h"
#include "plugins/plugin_registry.h"

namespace placementd::offline {

struct BaselinePlacement {
  /// The placer's device per group, and the same as a placement of the ops (pins enforced).
  std::vector<int> device_of_group;
  placement::Placement placement;
  /// False when the memory model rejects it.
  bool fits = false;
  /// Simulated step time; nullopt when it does not fit or an op sits on a device kind it has no
  /// profile for (`why` says which).
  std::optional<double> step_time_s;
  std::string why;
};

/// Runs placer `name` (default hyperparameters, seeded) on `grouping` of the graph and devices of
/// `simulator`, and judges its placement on `judge` when given (the placer plans on a model, the
/// truth times the answer), else on `simulator`. Throws what the registry or the placer throws
/// (plugin not loaded, placer refuses the problem).
BaselinePlacement place_baseline(const std::string& name, const sim::Simulator& simulator,
                                 const PluginRegistry& registry,
                                 const placement::Grouping& grouping, uint64_t seed,
                                 const sim::Simulator* judge = nullptr);

}  // namespace placementd::offline
