#pragma once

#include <cstdint>
#include <vector>

#include "placement/grouper.h"

namespace placement::plugins {

struct FluidOptions {
  int64_t groups = 256;
  int64_t max_iterations = 100;  // networkx's default
  int64_t seed = 1;
};

/// EAGLE (Lan et al., 2021, §III-A): asynchronous fluid communities (Parés et al., 2017) on the op
/// graph taken as undirected and unweighted. k communities start at k random ops with density 1 and
/// flow over the graph: visiting ops in random order, each op joins the community with the largest
/// summed density over itself and its neighbours (a community's density is 1 / its size), until no
/// op changes or `max_iterations` sweeps. Seeded by its own `seed`, so a model gets the same groups
/// in every run (stored policy state refers to them).
class FluidGrouper : public Grouper {
 public:
  explicit FluidGrouper(const FluidOptions& options)
      : groups_(options.groups), max_iterations_(options.max_iterations), seed_(options.seed) {}

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;

  /// Fluid communities on an undirected graph given as neighbour lists (each edge in both lists,
  /// no self loops) with `k` communities per connected component in proportion to its size (at
  /// least one each). Returns dense community ids, numbered in order of first vertex.
  static std::vector<int> communities(const std::vector<std::vector<int>>& neighbours, int64_t k,
                                      int64_t max_iterations, std::mt19937_64& rng);

 private:
  int64_t groups_;
  int64_t max_iterations_;
  int64_t seed_;
};

}  // namespace placement::plugins
