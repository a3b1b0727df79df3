#pragma once
// Plugin interface: maps the groups of a grouped graph to devices.

#include <random>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "placement/policy.h"

namespace placement {

/// A placer. Created by its plugin's factory with resolved hyperparameters; used by one session at
/// a time (not thread-safe).
class Placer {
 public:
  virtual ~Placer();

  /// Binds the placer to one problem (sizes networks, computes features). Called again whenever the
  /// graph, grouping or device set changes. Learned placers draw their initial parameters from
  /// `rng`, so a seeded run is reproducible. Throws std::invalid_argument if it cannot place it.
  virtual void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
                       std::mt19937_64& rng) = 0;

  /// A device index for every group. Stochastic placers sample from their policy with `rng`;
  /// deterministic ones return the same answer each time.
  virtual std::vector<int> place(std::mt19937_64& rng) = 0;

  /// The learned part, or nullptr for deterministic placers. Its actions are place()'s results.
  virtual TrainablePolicy* policy() { return nullptr; }
};

}  // namespace placement
