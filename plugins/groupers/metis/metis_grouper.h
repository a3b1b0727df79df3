#pragma once

#include <cstdint>

#include "placement/grouper.h"

namespace placement::plugins {

/// EAGLE (Lan et al., 2021, §III-A): k-way min-cut partition of the op graph with METIS, edges
/// weighted by the bytes they carry and ops by their compute time (profile forward + backward on
/// the fastest profiled kind; 1 when unprofiled), so that heavy communication stays inside groups
/// and groups are balanced in work.
class MetisGrouper : public Grouper {
 public:
  MetisGrouper(int64_t groups, double imbalance, int64_t seed) : groups_(groups), imbalance_(imbalance), seed_(seed) {}

  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;

 private:
  int64_t groups_;
  double imbalance_;
  int64_t seed_;
};

}  // namespace placement::plugins
