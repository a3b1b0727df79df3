#pragma once
// Plugin interface: clusters the ops of a graph into groups that are placed as a unit.

#include <random>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "placement/policy.h"

namespace placement {

/// A grouper. Created by its plugin's factory with resolved hyperparameters; used by one session at
/// a time (not thread-safe). Deterministic groupers ignore `rng`.
class Grouper {
 public:
  virtual ~Grouper();

  /// Groups `graph` for `devices`. The result must pass Grouping::validate(graph).
  virtual Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) = 0;

  /// The learned part, for groupers trained jointly with the placer (Hierarchical Planner);
  /// nullptr for fixed groupers. The action is the group of every op of the last group() call.
  virtual TrainablePolicy* policy() { return nullptr; }
};

}  // namespace placement
