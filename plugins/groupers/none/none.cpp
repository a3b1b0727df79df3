#include "none.h"

#include <numeric>

namespace placement::plugins {

Grouping NoGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  Grouping grouping;
  grouping.num_groups = static_cast<int>(graph.ops.size());
  grouping.group_of_op.resize(graph.ops.size());
  std::iota(grouping.group_of_op.begin(), grouping.group_of_op.end(), 0);
  return grouping;
}

}  // namespace placement::plugins
