#include "live/directive.h"

#include "live/live_profiles.h"

namespace placementd {

placement::messages::Directive make_directive(const Session& s, uint64_t placement_id,
                                              Reason reason) {
  placement::messages::Directive d;
  d.placement_id = placement_id;
  d.reason = reason;
  d.state = s.state;
  d.placement = s.candidates.at(placement_id).placement;
  d.profile = wants_profile(s, d.placement);
  d.after_step = s.advance_due_after;
  return d;
}

}  // namespace placementd
