#pragma once

#include <cstdint>

#include "torch_policy.h"

namespace placement::plugins {

/// The Hierarchical Planner's "Simple Planner" placer: every group's features through the same
/// two-layer feed-forward network to one logit per device; groups are placed independently.
NetworkFactory feedforward_network(int64_t hidden);

}  // namespace placement::plugins
