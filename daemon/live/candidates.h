#pragma once
// Where exploration's candidates come from, in the order they are offered: the best placement
// this uid stored for the graph and devices, all on one device, the warm start's imitation, the
// heuristics' placements the planning model does not rule out, each refit's (refit.cpp), then the
// learned policy's samples. The state machine (exploration.h)
// decides when one runs; this file decides which.

#include <optional>
#include <string>
#include <vector>

#include "live/session.h"
#include "placement/placement.h"

namespace placementd {

/// A placement worth running next, where it came from, and the policy's sample behind it (none
/// for the stored best, all on one device and the heuristics' placements).
struct Proposal {
  placement::Placement placement;
  Reason reason = Reason::kPolicy;
  std::optional<std::vector<int>> action;
};

// Session::propose() (private: only the state machine draws candidates) is defined in
// candidates.cpp: the stored best, all on one device, the warm start's placement, the heuristics'
// (in the first exploration) and each refit's once each (when they fit and did not run), then a
// policy sample the memory model passes and that was not measured already (a rejected sample trains
// the policy with the failing reward, a repeat with its measured reward); nullopt when the policy
// only proposes placements already measured or rejected: exploration has converged.

/// "All on one device, if it fits" (issue #4: the answer is never worse than that baseline): every
/// op on the first GPU, or on device 0 without one, offered once right after the start; nullopt
/// when that is what already ran or the memory model says it does not fit.
std::optional<placement::Placement> single_device_candidate(const Session& session);

/// Whether a candidate of this placement was issued in this session (measured, failed or stale).
bool issued(const Session& session, const std::string& fingerprint);

/// The candidate measured under this placement (not stale), if any: repeats are scored, not run.
const CandidateRecord* measured(const Session& session, const std::string& fingerprint);

/// The policy's reward for a placement measured at `step_time_s`: −√t.
double reward_of(double step_time_s);

}  // namespace placementd
