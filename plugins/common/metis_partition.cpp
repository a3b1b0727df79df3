#include "metis_partition.h"

#include <metis.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

#include "placement/library_output.h"

namespace placement::plugins {

namespace {

// METIS weights are 32-bit integers; callers scale to sensible units, we keep them in range.
idx_t clamp_weight(double w) {
  // Sums of weights over a part must not overflow idx_t.
  constexpr idx_t kMaxWeight = std::numeric_limits<idx_t>::max() / 1024;
  return static_cast<idx_t>(std::clamp(w, 1.0, static_cast<double>(kMaxWeight)));
}

}  // namespace

std::vector<int> metis_partition(const WeightedGraph& graph, int parts, double imbalance,
                                 int64_t seed) {
  const idx_t n = static_cast<idx_t>(graph.vertex_weight.size());
  std::vector<int> dense(static_cast<size_t>(n), 0);
  if (parts <= 1 || n <= 1) return dense;
  // Undirected, no self loops, each link listed from both ends, parallel links merged.
  const std::vector<std::map<int, double>> adjacency = graph.adjacency();
  std::vector<idx_t> xadj{0}, adjncy, adjwgt, vwgt;
  for (idx_t u = 0; u < n; ++u) {
    for (const auto& [v, w] : adjacency[u]) {
      adjncy.push_back(v);
      adjwgt.push_back(clamp_weight(w));
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
    vwgt.push_back(clamp_weight(graph.vertex_weight[u]));
  }
  idx_t constraints = 1, vertices = n, nparts = std::min<idx_t>(parts, n), cut = 0;
  std::vector<idx_t> part(n, 0);
  real_t ubvec = static_cast<real_t>(1.0 + imbalance);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed);
  // METIS prints its complaints with printf ("***Cannot bisect a graph with 0 vertices!" for the
  // subproblems of a graph cut into nearly as many parts as it has heavy vertices, the partition
  // still valid): dropped when it succeeds, part of the error when it fails.
  int rc = METIS_OK;
  const std::string said = capture_stdout([&] {
    rc = METIS_PartGraphKway(&vertices, &constraints, xadj.data(), adjncy.data(), vwgt.data(),
                             nullptr, adjwgt.data(), &nparts, nullptr, &ubvec, options, &cut,
                             part.data());
  });
  if (rc != METIS_OK) {
    std::string detail;  // METIS's lines, tab-indented, as one
    for (const char c : said) detail += c == '\n' || c == '\t' ? ' ' : c;
    const size_t first = detail.find_first_not_of(' ');
    detail = first == std::string::npos ? "" : detail.substr(first);
    throw std::runtime_error("METIS_PartGraphKway failed with code " + std::to_string(rc) +
                             (detail.empty() ? "" : " (METIS said: " + detail + ")"));
  }
  std::vector<int> id(static_cast<size_t>(nparts), -1);
  int next = 0;
  for (idx_t u = 0; u < n; ++u) {
    int& p = id[static_cast<size_t>(part[u])];
    if (p < 0) p = next++;
    dense[u] = p;
  }
  return dense;
}

}  // namespace placement::plugins
