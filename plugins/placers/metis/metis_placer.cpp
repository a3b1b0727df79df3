#include "metis_placer.h"

#include <algorithm>
#include <stdexcept>

#include "metis_partition.h"
#include "placement_helpers.h"

namespace placement::plugins {

void MetisPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices, std::mt19937_64&) {
  const std::vector<int> usable = usable_devices(devices, gpus_only_);
  if (usable.empty()) throw std::invalid_argument("metis placer: the device set is empty");

  WeightedGraph groups;
  groups.vertex_weight.assign(static_cast<size_t>(grouping.num_groups), 0.0);
  for (size_t i = 0; i < graph.ops.size(); ++i)
    groups.vertex_weight[grouping.group_of_op[i]] += std::max(fastest_compute_micros(graph.ops[i]), 1.0);
  for (const Edge& e : graph.edges) {
    const int a = grouping.group_of_op[e.src], b = grouping.group_of_op[e.dst];
    if (a != b) groups.links.push_back({a, b, static_cast<double>(e.bytes) / 1024.0});
  }
  const std::vector<int> part = metis_partition(groups, static_cast<int>(usable.size()), imbalance_, seed_);
  device_of_group_.clear();
  for (int p : part) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
