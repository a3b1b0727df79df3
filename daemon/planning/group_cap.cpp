#include "planning/group_cap.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace placementd {

placement::Grouping cap_groups(const placement::OpGraph& graph, const placement::Grouping& grouping,
                               int max_groups) {
  if (max_groups < 1)
    throw std::invalid_argument("max_groups must be at least 1, got " + std::to_string(max_groups));
  if (grouping.num_groups <= max_groups) return grouping;
  const int G = grouping.num_groups;
  const std::vector<int> order = graph.topological_order();
  std::vector<size_t> first(G, order.size()), ops(G, 0);
  for (size_t position = 0; position < order.size(); ++position) {
    const int g = grouping.group_of_op[order[position]];
    first[g] = std::min(first[g], position);
    ++ops[g];
  }
  std::vector<int> by_first(G);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](int a, int b) { return first[a] < first[b]; });

  // Run k takes the groups that start within the k-th equal share of the ops: the run index
  // floor(ops before the group · max_groups / total) never decreases. Empty groups sort last, where
  // `before` is the total, so the index is clamped into the last run.
  const size_t total = order.size();
  std::vector<int> merged(G, -1);
  int runs = 0, last_run = -1;
  size_t before = 0;
  for (int g : by_first) {
    const int run = std::min(
        max_groups - 1,
        static_cast<int>(before * static_cast<size_t>(max_groups) / std::max<size_t>(total, 1)));
    if (run != last_run) {
      last_run = run;
      ++runs;  // dense ids: a run that no group starts in is skipped
    }
    merged[g] = runs - 1;
    before += ops[g];
  }
  placement::Grouping out;
  out.num_groups = runs;
  out.group_of_op.reserve(grouping.group_of_op.size());
  for (int g : grouping.group_of_op) out.group_of_op.push_back(merged[g]);
  return out;
}

}  // namespace placementd
