#pragma once

#include "placement/grouper.h"

namespace placement::plugins {

/// No grouping: every op is its own group (the placer decides per op, as ColocRL without
/// colocation and HP's "no grouping" ablation).
class NoGrouper : public Grouper {
 public:
  Grouping group(const OpGraph& graph, const DeviceSet& devices, std::mt19937_64& rng) override;
};

}  // namespace placement::plugins
