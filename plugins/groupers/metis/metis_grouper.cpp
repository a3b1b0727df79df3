#include "metis_grouper.h"

#include <algorithm>

#include "metis_partition.h"
#include "placement_helpers.h"

namespace placement::plugins {

Grouping MetisGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  // Links weigh the bytes they carry (KiB); ops their compute time on the fastest profiled kind
  // (microseconds), or 1 when unprofiled.
  WeightedGraph weighted;
  for (const Op& op : graph.ops) weighted.vertex_weight.push_back(fastest_compute_micros(op));
  for (const Edge& e : graph.edges)
    weighted.links.push_back({e.src, e.dst, static_cast<double>(e.bytes) / 1024.0});
  Grouping grouping;
  // At least 4 ops a group: nearly one-op parts make METIS's recursive bisection fail on empty
  // subgraphs (and print about it), and cut nothing worth cutting.
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(groups_, static_cast<int64_t>(graph.ops.size()) / 4));
  grouping.group_of_op = metis_partition(weighted, static_cast<int>(parts), imbalance_, seed_);
  for (int g : grouping.group_of_op) grouping.num_groups = std::max(grouping.num_groups, g + 1);
  return grouping;
}

}  // namespace placement::plugins
