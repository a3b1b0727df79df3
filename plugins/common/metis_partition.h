#pragma once
// METIS k-way min-cut partitioning shared by the metis grouper and the metis placer.

#include <cstdint>
#include <vector>

#include "weighted_graph.h"

namespace placement::plugins {

/// Splits `graph` into at most `parts` parts minimising the weight of cut links while balancing
/// vertex weight within `imbalance`; deterministic for a given `seed`. Returns the part of every
/// vertex, numbered densely from 0 in order of first appearance (METIS may leave parts empty).
/// Throws std::runtime_error if METIS fails.
std::vector<int> metis_partition(const WeightedGraph& graph, int parts, double imbalance,
                                 int64_t seed);

}  // namespace placement::plugins
