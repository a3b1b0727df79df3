#pragma once
// A planning model that is wrong the way a profile-based simulator is wrong about a real job: how a
// simulator-trained policy is judged honestly offline, where the "real" step times come from a
// simulator too. Searching and evaluating on the same simulator would credit the search with
// knowledge no live session has.

#include <cstdint>

#include "planning/sim/simulator.h"

namespace placementd::sim {

/// A copy of `truth` whose op times (every profiled kind, forward, backward and update) and link
/// bandwidths are each scaled by an independent log-normal factor exp(sigma · N(0, 1)), median 1.
/// Memory sizes are kept: the memory model is exact in both. Deterministic for a seed; sigma 0
/// gives the same times. Throws std::invalid_argument for a negative sigma.
Simulator with_model_error(const Simulator& truth, double sigma, uint64_t seed);

}  // namespace placementd::sim
