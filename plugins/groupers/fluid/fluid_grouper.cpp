#include "fluid_grouper.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace placement::plugins {

namespace {

std::vector<std::vector<int>> components(const std::vector<std::vector<int>>& neighbours) {
  std::vector<std::vector<int>> out;
  std::vector<char> seen(neighbours.size(), 0);
  for (size_t start = 0; start < neighbours.size(); ++start) {
    if (seen[start]) continue;
    std::vector<int> members{static_cast<int>(start)};
    seen[start] = 1;
    for (size_t i = 0; i < members.size(); ++i)
      for (int v : neighbours[members[i]])
        if (!seen[v]) {
          seen[v] = 1;
          members.push_back(v);
        }
    out.push_back(std::move(members));
  }
  return out;
}

// The algorithm of Parés et al. on one connected component; writes community ids from `first_id`.
void flow(const std::vector<std::vector<int>>& neighbours, std::vector<int> vertices, int k,
          int first_id, int64_t max_iterations, std::mt19937_64& rng, std::vector<int>& community) {
  std::shuffle(vertices.begin(), vertices.end(), rng);
  std::vector<int64_t> size(static_cast<size_t>(k), 1);
  for (int c = 0; c < k; ++c) community[vertices[c]] = first_id + c;
  std::vector<double> score(static_cast<size_t>(k), 0.0);
  std::vector<int> touched, best;
  for (int64_t sweep = 0; sweep < max_iterations; ++sweep) {
    bool changed = false;
    std::shuffle(vertices.begin(), vertices.end(), rng);
    for (int v : vertices) {
      touched.clear();
      auto add = [&](int u) {
        if (community[u] < 0) return;
        const int c = community[u] - first_id;
        if (score[c] == 0) touched.push_back(c);
        score[c] += 1.0 / static_cast<double>(size[c]);
      };
      add(v);
      for (int u : neighbours[v]) add(u);
      if (touched.empty()) continue;  // no community has reached v yet
      double top = 0;
      for (int c : touched) top = std::max(top, score[c]);
      best.clear();
      // Ties within rounding of the densities count as ties.
      for (int c : touched)
        if (score[c] >= top * (1 - 1e-12)) best.push_back(c);
      for (int c : touched) score[c] = 0;
      const int current = community[v] < 0 ? -1 : community[v] - first_id;
      if (std::find(best.begin(), best.end(), current) != best.end()) continue;
      std::sort(best.begin(), best.end());  // the draw must not depend on visiting order
      const int chosen = best[std::uniform_int_distribution<size_t>(0, best.size() - 1)(rng)];
      // No community empties: its last vertex scores it 1, and no other can score more than 1
      // (at most all of its size(c) members, each 1 / size(c)); a tie keeps the current one.
      if (current >= 0) --size[current];
      ++size[chosen];
      community[v] = first_id + chosen;
      changed = true;
    }
    if (!changed) break;
  }
  // Sweeps carry communities a few hops each; on long chains max_iterations may end before every
  // vertex is reached. The rest join the nearest community (breadth-first from the assigned ones).
  std::vector<int> frontier;
  for (int v : vertices)
    if (community[v] >= 0) frontier.push_back(v);
  for (size_t i = 0; i < frontier.size(); ++i)
    for (int u : neighbours[frontier[i]])
      if (community[u] < 0) {
        community[u] = community[frontier[i]];
        frontier.push_back(u);
      }
}

}  // namespace

std::vector<int> FluidGrouper::communities(const std::vector<std::vector<int>>& neighbours,
                                           int64_t k, int64_t max_iterations,
                                           std::mt19937_64& rng) {
  const size_t n = neighbours.size();
  std::vector<int> community(n, -1);
  if (n == 0) return community;
  int next_id = 0;
  for (const std::vector<int>& members : components(neighbours)) {
    const double share =
        static_cast<double>(k) * static_cast<double>(members.size()) / static_cast<double>(n);
    const int kc = static_cast<int>(
        std::clamp<double>(std::round(share), 1.0, static_cast<double>(members.size())));
    flow(neighbours, members, kc, next_id, max_iterations, rng, community);
    next_id += kc;
  }
  // Renumbered in order of first vertex, so ids do not depend on the order components were seen.
  std::vector<int> id(static_cast<size_t>(next_id), -1);
  int dense = 0;
  for (int& c : community) {
    if (id[c] < 0) id[c] = dense++;
    c = id[c];
  }
  return community;
}

Grouping FluidGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  std::vector<std::vector<int>> neighbours(graph.ops.size());
  for (const Edge& e : graph.edges) {
    if (e.src == e.dst) continue;
    neighbours[e.src].push_back(e.dst);
    neighbours[e.dst].push_back(e.src);
  }
  for (auto& list : neighbours) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed_));
  Grouping grouping;
  grouping.group_of_op = communities(neighbours, groups_, max_iterations_, rng);
  for (int g : grouping.group_of_op) grouping.num_groups = std::max(grouping.num_groups, g + 1);
  return grouping;
}

}  // namespace placement::plugins
