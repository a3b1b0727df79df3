#pragma once
// The one place a placement directive is made. Whatever decided the placement (the state machine,
// a later request for the one in force, a plugin failure), the job is sent the same fields, filled
// here from the session.

#include <cstdint>

#include "live/session.h"
#include "placement/messages.h"

namespace placementd {

/// The directive that runs candidate `placement_id` for `reason`: the candidate's placement, the
/// session's state, whether the job profiles under it (live_profiles.h), and, when a step report
/// made the session decide it, that report's step (Session::advance_due_after).
placement::messages::Directive make_directive(const Session& session, uint64_t placement_id,
                                              Reason reason);

}  // namespace placementd
