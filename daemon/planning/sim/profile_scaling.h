#pragma once
// A device kind nobody profiled, estimated from one that was: every op `speedup` times faster.

#include <string>

#include "placement/graph.h"

namespace placementd::sim {

/// Gives every op profiled on `from` a `to` profile whose forward, backward and update times are
/// `speedup` times shorter (memory unchanged), replacing any `to` profile it had. The papers'
/// table runs its GPU rows this way from CPU captures: a uniform factor, so it keeps the graph's
/// shape and ignores which ops a GPU speeds up most.
void scale_profile(placement::OpGraph& graph, const std::string& from, const std::string& to, double speedup);

}  // namespace placementd::sim
