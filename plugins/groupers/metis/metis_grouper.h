#pragma once

#include <cstdint>

#include "placement/grouper.h"

namespace placement::plugins {

struct MetisGrouperOptions {
  int64_t groups = 256;
  double imbalance = 0.03;
  int64_t seed = 1;
};

/// EAGLE (Lan et al., 2021, §III-A): k-way min-cut partition of the op graph with METIS, edges
/// weighted by the bytes they carry and ops by their compute time (profile forward + backward on
/// the fastest profiled kind; 1 when unprofiled), so that heavy communication stays inside groups
/// and groups are balanced in work.
class MetisGrouper : public Grouper {
 public:
  explicit MetisGrouper(const MetisGrouperOptions& options)
      : groups_(options.groups), imbalance_(options.imbalance), seed_(options.seed) {}

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;

 private:
  int64_t groups_;
  double imbalance_;
  int64_t seed_;
};

}  // namespace placement::plugins
