#include "metis_grouper.h"

#include <metis.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

namespace placement::plugins {

namespace {

// METIS weights are 32-bit integers: bytes in KiB and times in microseconds, at least 1.
idx_t clamp_weight(double w) {
  return static_cast<idx_t>(std::clamp(w, 1.0, static_cast<double>(std::numeric_limits<idx_t>::max() / 1024)));
}

}  // namespace

Grouping MetisGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64&) {
  const idx_t n = static_cast<idx_t>(graph.ops.size());
  Grouping grouping;
  const idx_t parts = static_cast<idx_t>(std::min<int64_t>(groups_, n));
  if (parts <= 1) {
    grouping.num_groups = n > 0 ? 1 : 0;
    grouping.group_of_op.assign(graph.ops.size(), 0);
    return grouping;
  }
  // METIS wants an undirected graph without self loops, each edge listed from both ends.
  std::vector<std::map<idx_t, double>> adjacency(n);
  for (const Edge& e : graph.edges) {
    if (e.src == e.dst) continue;
    adjacency[e.src][e.dst] += static_cast<double>(e.bytes) / 1024.0;
    adjacency[e.dst][e.src] += static_cast<double>(e.bytes) / 1024.0;
  }
  std::vector<idx_t> xadj{0}, adjncy, adjwgt, vwgt;
  for (idx_t u = 0; u < n; ++u) {
    for (const auto& [v, kib] : adjacency[u]) {
      adjncy.push_back(v);
      adjwgt.push_back(clamp_weight(kib));
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
    double micros = 0;
    for (const auto& [kind, p] : graph.ops[u].profile) {
      const double t = (p.forward_s + p.backward_s) * 1e6;
      micros = micros == 0 ? t : std::min(micros, t);
    }
    vwgt.push_back(clamp_weight(micros));
  }
  idx_t constraints = 1, vertices = n, nparts = parts, cut = 0;
  std::vector<idx_t> part(n, 0);
  real_t ubvec = static_cast<real_t>(1.0 + imbalance_);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed_);  // same graph, same groups
  const int rc = METIS_PartGraphKway(&vertices, &constraints, xadj.data(), adjncy.data(), vwgt.data(), nullptr,
                                     adjwgt.data(), &nparts, nullptr, &ubvec, options, &cut, part.data());
  if (rc != METIS_OK) throw std::runtime_error("metis grouper: METIS_PartGraphKway failed with code " + std::to_string(rc));
  // METIS may leave parts empty: number the groups densely, in order of their first op.
  std::vector<int> dense(static_cast<size_t>(parts), -1);
  grouping.group_of_op.reserve(graph.ops.size());
  for (idx_t u = 0; u < n; ++u) {
    int& id = dense[static_cast<size_t>(part[u])];
    if (id < 0) id = grouping.num_groups++;
    grouping.group_of_op.push_back(id);
  }
  return grouping;
}

}  // namespace placement::plugins
