#pragma once
// Per-op profiles a job measures on its own steps (protocol 2): when to ask for them, and taking
// them into the session, so the simulator (warm start, memory model) works without a capture file.

#include "live/session.h"
#include "placement/graph.h"
#include "placement/placement.h"

namespace placementd {

/// Whether the job profiles its steps when asked (protocol 2, profile steps above 0).
bool can_profile(const Session& session);

/// Whether the job should profile its steps under `placement`: it can, and the placement puts ops
/// on a device kind the graph has no profile for — on one device of that kind, unless the
/// all-on-one-device candidate that follows the start will not run on it (a split's op times
/// include copies between devices).
bool wants_profile(const Session& session, const placement::Placement& placement);

/// Whether every device kind of the session's devices has profiles in its graph.
bool fully_profiled(const Session& session);

/// Merges `report` into the session's graph and rebuilds the memory model with the measured
/// activation sizes. Throws std::invalid_argument naming the entry at fault (an op the graph lacks,
/// a kind none of the job's devices has, a placement id never issued); nothing changes then.
void apply_profiles(Session& session, const placement::messages::ProfileReport& report);

}  // namespace placementd
