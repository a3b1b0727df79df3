#pragma once
// Scotch static mapping shared by the scotch and mincut placers.

#include <cstdint>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "weighted_graph.h"

namespace placement::plugins {

/// The machine Scotch maps onto: each processor's relative compute power and the cost of a unit of
/// traffic between every pair (Scotch charges traffic × distance).
struct TargetMachine {
  std::vector<double> power;
  std::vector<std::vector<double>> distance;
};

/// `devices` restricted to `usable` (indices into it). Power: the device's speed over the graph's
/// total profiled compute time on its kind (a CPU whose profile is 20× a GPU's gets 1/20 of the
/// power), or the speed alone when the graph has no profiles. Distance: the time a 1 MiB transfer
/// takes on the link (latency + 1 MiB / bandwidth), so slow or high-latency links look far.
TargetMachine target_machine(const OpGraph& graph, const DeviceSet& devices,
                             const std::vector<int>& usable);

/// Scotch's static mapping of `graph` onto `target`: minimises Σ traffic × distance while giving
/// each processor work in proportion to its power, within `imbalance`. Returns the processor (index
/// into `target`) of every vertex; the same graph and seed give the same mapping. Throws
/// std::runtime_error naming the Scotch call that failed.
std::vector<int> scotch_map(const WeightedGraph& graph, const TargetMachine& target,
                            double imbalance, int64_t seed);

}  // namespace placement::plugins
