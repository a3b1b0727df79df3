#include "hp_features.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "placement_helpers.h"

namespace placement::plugins {

namespace {

float log_dim(int64_t d) {
  return static_cast<float>(std::log1p(static_cast<double>(std::max<int64_t>(d, 0))));
}

std::vector<int> breadth_first_positions(const OpGraph& graph) {
  const auto consumers = graph.consumers();
  std::vector<int> indegree(graph.ops.size(), 0);
  for (const Edge& e : graph.edges) ++indegree[e.dst];
  std::vector<int> position(graph.ops.size(), -1);
  std::deque<int> queue;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (indegree[i] == 0) queue.push_back(static_cast<int>(i));
  int next = 0;
  while (!queue.empty()) {
    const int op = queue.front();
    queue.pop_front();
    if (position[op] >= 0) continue;
    position[op] = next++;
    for (int c : consumers[op])
      if (position[c] < 0) queue.push_back(c);
  }
  return position;
}

}  // namespace

OpFeatures op_features(const OpGraph& graph, int vocabulary) {
  OpFeatures f;
  std::map<std::string, int> counts;
  for (const Op& op : graph.ops) ++counts[op.kind];
  std::vector<std::pair<std::string, int>> ranked(counts.begin(), counts.end());
  // Most frequent first; ties by name so the vocabulary does not depend on op order.
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (int i = 0; i < std::min<int>(vocabulary, static_cast<int>(ranked.size())); ++i)
    f.vocabulary.push_back(ranked[i].first);
  std::map<std::string, int> index;
  for (size_t i = 0; i < f.vocabulary.size(); ++i) index[f.vocabulary[i]] = static_cast<int>(i);

  f.bfs_position = breadth_first_positions(graph);
  const auto producers = graph.producers();
  const auto consumers = graph.consumers();
  const float n = static_cast<float>(std::max<size_t>(graph.ops.size(), 1));
  f.numeric.assign(graph.ops.size() * OpFeatures::kNumericWidth, -1.0f);
  for (const Op& op : graph.ops) {
    auto it = index.find(op.kind);
    f.kind.push_back(it == index.end() ? static_cast<int>(f.vocabulary.size()) : it->second);
    float* row = &f.numeric[static_cast<size_t>(op.id) * OpFeatures::kNumericWidth];
    for (int o = 0; o < std::min<int>(OpFeatures::kOutputs, static_cast<int>(op.outputs.size()));
         ++o)
      for (int d = 0;
           d < std::min<int>(OpFeatures::kDims, static_cast<int>(op.outputs[o].shape.size())); ++d)
        row[o * OpFeatures::kDims + d] = log_dim(op.outputs[o].shape[d]);
    float* adj = row + static_cast<ptrdiff_t>(OpFeatures::kOutputs) * OpFeatures::kDims;
    for (int k = 0;
         k < std::min<int>(OpFeatures::kNeighbours, static_cast<int>(producers[op.id].size())); ++k)
      adj[k] = static_cast<float>(f.bfs_position[producers[op.id][k]]) / n;
    for (int k = 0;
         k < std::min<int>(OpFeatures::kNeighbours, static_cast<int>(consumers[op.id].size())); ++k)
      adj[OpFeatures::kNeighbours + k] =
          static_cast<float>(f.bfs_position[consumers[op.id][k]]) / n;
  }
  return f;
}

GroupFeatures group_features(const OpGraph& graph, const Grouping& grouping,
                             const OpFeatures& ops) {
  GroupFeatures g;
  const int G = grouping.num_groups;
  const int V = ops.vocabulary_size();
  g.num_groups = G;
  g.width = V + GroupFeatures::kShapeWidth + G + GroupFeatures::kCostWidth;
  g.rows.assign(static_cast<size_t>(G) * g.width, 0.0f);
  std::vector<double> shape_sums(static_cast<size_t>(G) * GroupFeatures::kShapeWidth, 0.0);
  std::vector<double> micros(G, 0.0), parameter_bytes(G, 0.0);
  for (const Op& op : graph.ops) {
    const int grp = grouping.group_of_op[op.id];
    g.rows[static_cast<size_t>(grp) * g.width + ops.kind[op.id]] += 1.0f;
    for (int o = 0; o < std::min<int>(4, static_cast<int>(op.outputs.size())); ++o)
      for (int d = 0; d < std::min<int>(4, static_cast<int>(op.outputs[o].shape.size())); ++d)
        shape_sums[static_cast<size_t>(grp) * GroupFeatures::kShapeWidth +
                   static_cast<size_t>(o) * 4 + d] +=
            static_cast<double>(std::max<int64_t>(op.outputs[o].shape[d], 0));
    micros[grp] += fastest_compute_micros(op);
    parameter_bytes[grp] += static_cast<double>(op.parameter_bytes);
  }
  g.adjacency.assign(static_cast<size_t>(G) * G, 0.0f);
  std::vector<double> traffic(static_cast<size_t>(G) * G, 0.0);
  for (const Edge& e : graph.edges) {
    const int a = grouping.group_of_op[e.src], b = grouping.group_of_op[e.dst];
    if (a == b) continue;
    // One byte still counts as a connection: shape-only graphs carry no byte sizes.
    const double w = static_cast<double>(std::max<uint64_t>(e.bytes, 1));
    traffic[static_cast<size_t>(a) * G + b] += w;
    traffic[static_cast<size_t>(b) * G + a] += w;
  }
  for (int a = 0; a < G; ++a) {
    double total = 0;
    for (int b = 0; b < G; ++b) total += traffic[static_cast<size_t>(a) * G + b];
    float* row = &g.rows[static_cast<size_t>(a) * g.width];
    for (int k = 0; k < GroupFeatures::kShapeWidth; ++k)
      row[V + k] = static_cast<float>(
          std::log1p(shape_sums[static_cast<size_t>(a) * GroupFeatures::kShapeWidth + k]));
    for (int b = 0; b < G; ++b) {
      const float share =
          total > 0 ? static_cast<float>(traffic[static_cast<size_t>(a) * G + b] / total) : 0.0f;
      row[V + GroupFeatures::kShapeWidth + b] = share;
      g.adjacency[static_cast<size_t>(a) * G + b] = share;
    }
    row[V + GroupFeatures::kShapeWidth + G] = static_cast<float>(std::log1p(micros[a]));
    row[V + GroupFeatures::kShapeWidth + G + 1] =
        static_cast<float>(std::log1p(parameter_bytes[a] / (1 << 20)));
  }
  return g;
}

}  // namespace placement::plugins
