#include "scotch_placer.h"

#include <set>
#include <stdexcept>

#include "placement_helpers.h"
#include "scotch_mapping.h"

namespace placement::plugins {

namespace {

// Where the graph has profiles, devices of a kind no op has a profile for cannot be weighed
// against the others: Scotch would take them for as fast as the fastest kind. They are left out,
// unless that leaves nothing.
std::vector<int> profiled_kinds_only(const OpGraph& graph, const DeviceSet& devices,
                                     std::vector<int> usable) {
  std::set<std::string> kinds;
  for (const Op& op : graph.ops)
    for (const auto& [kind, p] : op.profile) kinds.insert(kind);
  if (kinds.empty()) return usable;
  std::vector<int> kept;
  for (int d : usable)
    if (kinds.count(to_string(devices.devices[d].kind))) kept.push_back(d);
  return kept.empty() ? usable : kept;
}

}  // namespace

void ScotchPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
                           std::mt19937_64&) {
  const std::vector<int> usable =
      profiled_kinds_only(graph, devices, usable_devices(devices, gpus_only_));
  if (usable.empty()) throw std::invalid_argument("scotch placer: the device set is empty");
  const std::vector<int> processor = scotch_map(
      group_graph(graph, grouping), target_machine(graph, devices, usable), imbalance_, seed_);
  device_of_group_.clear();
  for (int p : processor) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
