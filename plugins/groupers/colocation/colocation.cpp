#include "colocation.h"

#include <numeric>
#include <set>

namespace placement::plugins {

namespace {

struct DisjointSets {
  explicit DisjointSets(size_t n) : parent(n), size(n, 1) {
    std::iota(parent.begin(), parent.end(), 0);
  }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  std::vector<int> parent;
  std::vector<int64_t> size;
};

}  // namespace

Grouping ColocationGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  const size_t n = graph.ops.size();
  DisjointSets sets(n);
  // The pin of a whole set, so that a chain cannot carry a cpu-pinned op into a cuda-pinned group.
  std::vector<std::optional<DeviceKind>> pin(n);
  for (size_t i = 0; i < n; ++i) pin[i] = graph.ops[i].pinned;

  const auto consumers = graph.consumers();
  // Topological order makes one pass reach the fixpoint: when op u is visited, its consumer's set
  // is final apart from merges of later ops into it, which only grow it.
  for (int u : graph.topological_order()) {
    const std::set<int> distinct(consumers[u].begin(), consumers[u].end());
    if (distinct.size() != 1) continue;
    const int a = sets.find(u);
    const int b = sets.find(*distinct.begin());
    if (a == b) continue;
    if (pin[a] && pin[b] && *pin[a] != *pin[b]) continue;
    if (max_group_ops_ > 0 && sets.size[a] + sets.size[b] > max_group_ops_) continue;
    sets.parent[a] = b;
    sets.size[b] += sets.size[a];
    if (!pin[b]) pin[b] = pin[a];
  }

  // Dense group ids in order of each group's first op, so results are stable across runs.
  Grouping grouping;
  grouping.group_of_op.assign(n, -1);
  std::vector<int> id_of_root(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const int root = sets.find(static_cast<int>(i));
    if (id_of_root[root] < 0) id_of_root[root] = grouping.num_groups++;
    grouping.group_of_op[i] = id_of_root[root];
  }
  return grouping;
}

}  // namespace placement::plugins
