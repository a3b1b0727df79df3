#pragma once
// The undirected weighted graphs the partitioners (METIS, Scotch) cut. Header-only: plugins never
// load one another, and each links only the partitioner it uses.

#include <algorithm>
#include <map>
#include <vector>

#include "placement/graph.h"
#include "placement/grouper.h"
#include "placement_helpers.h"

namespace placement::plugins {

/// Vertex weights (work) and links with weights (bytes); links may repeat and go either way.
struct WeightedGraph {
  std::vector<double> vertex_weight;
  struct Link {
    int a, b;
    double weight;
  };
  std::vector<Link> links;

  /// Each vertex's neighbours with the summed weight of the links to them, both directions, no
  /// self loops: the symmetric adjacency both METIS and Scotch require.
  std::vector<std::map<int, double>> adjacency() const {
    std::vector<std::map<int, double>> adj(vertex_weight.size());
    for (const Link& link : links) {
      if (link.a == link.b) continue;
      adj[link.a][link.b] += link.weight;
      adj[link.b][link.a] += link.weight;
    }
    return adj;
  }
};

/// The group graph the baseline placers partition: each group weighted by its ops' forward +
/// backward time on the fastest profiled device kind (µs, at least 1 per op), links by the KiB
/// that cross between groups.
inline WeightedGraph group_graph(const OpGraph& graph, const Grouping& grouping) {
  WeightedGraph groups;
  groups.vertex_weight.assign(static_cast<size_t>(grouping.num_groups), 0.0);
  for (size_t i = 0; i < graph.ops.size(); ++i)
    groups.vertex_weight[grouping.group_of_op[i]] +=
        std::max(fastest_compute_micros(graph.ops[i]), 1.0);
  for (const Edge& e : graph.edges) {
    const int a = grouping.group_of_op[e.src], b = grouping.group_of_op[e.dst];
    if (a != b) groups.links.push_back({a, b, static_cast<double>(e.bytes) / 1024.0});
  }
  return groups;
}

}  // namespace placement::plugins
