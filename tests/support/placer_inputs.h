#pragma once
// For driving one placer directly, without a grouper or a session: the grouping that leaves every
// op alone, a graph of equal independent ops, and one prepare-and-place round.

#include <random>
#include <string>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "placement/placer.h"
#include "test_graphs.h"

namespace placement::testing {

/// Every op its own group, so that the placer alone decides where each op goes.
inline Grouping each_op_alone(const OpGraph& g) {
  Grouping grouping;
  grouping.num_groups = static_cast<int>(g.ops.size());
  for (int i = 0; i < grouping.num_groups; ++i) grouping.group_of_op.push_back(i);
  return grouping;
}

/// `n` independent ops of equal work (1 ms forward on cuda), no traffic.
inline OpGraph independent_ops(int n) {
  OpGraph g;
  for (int i = 0; i < n; ++i)
    g.ops.push_back({i, "op." + std::to_string(i), "aten::x", {}, 0, {}, {}});
  profile_all(g, DeviceKind::kCuda, 1e-3);
  return g;
}

/// Prepares `placer` for `g` (each op alone) on `d` and returns its first placement, seed 1.
inline std::vector<int> prepared(Placer& placer, const OpGraph& g, const DeviceSet& d) {
  std::mt19937_64 rng(1);
  placer.prepare(g, each_op_alone(g), d, rng);
  return placer.place(rng);
}

}  // namespace placement::testing
