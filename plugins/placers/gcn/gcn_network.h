#pragma once

#include <cstdint>

#include "torch_policy.h"

namespace placement::plugins {

/// EAGLE's GCN placer: two graph-convolution layers over the group graph (Kipf & Welling, with the
/// traffic-weighted adjacency plus self loops, row-normalised), then a per-group softmax.
NetworkFactory gcn_network(int64_t hidden);

}  // namespace placement::plugins
