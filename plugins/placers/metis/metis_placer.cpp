#include "metis_placer.h"

#include <algorithm>
#include <stdexcept>

#include "metis_partition.h"

namespace placement::plugins {

void MetisPlacer::prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices) {
  std::vector<int> usable;
  for (size_t d = 0; d < devices.size(); ++d)
    if (!gpus_only_ || devices.devices[d].kind == DeviceKind::kCuda) usable.push_back(static_cast<int>(d));
  if (usable.empty())
    for (size_t d = 0; d < devices.size(); ++d) usable.push_back(static_cast<int>(d));
  if (usable.empty()) throw std::invalid_argument("metis placer: the device set is empty");

  WeightedGraph groups;
  groups.vertex_weight.assign(static_cast<size_t>(grouping.num_groups), 0.0);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    double micros = 0;
    for (const auto& [kind, p] : graph.ops[i].profile) {
      const double t = (p.forward_s + p.backward_s) * 1e6;
      micros = micros == 0 ? t : std::min(micros, t);
    }
    groups.vertex_weight[grouping.group_of_op[i]] += std::max(micros, 1.0);
  }
  for (const Edge& e : graph.edges) {
    const int a = grouping.group_of_op[e.src], b = grouping.group_of_op[e.dst];
    if (a != b) groups.links.push_back({a, b, static_cast<double>(e.bytes) / 1024.0});
  }
  const std::vector<int> part = metis_partition(groups, static_cast<int>(usable.size()), imbalance_, seed_);
  device_of_group_.clear();
  for (int p : part) device_of_group_.push_back(usable[p]);
}

}  // namespace placement::plugins
