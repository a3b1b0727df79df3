#include "live/session.h"

namespace placementd {

placement::messages::Directive Session::directive(uint64_t placement_id, Reason reason) const {
  placement::messages::Directive d;
  d.placement_id = placement_id;
  d.reason = reason;
  d.state = state_;
  d.placement = candidates_.at(placement_id).placement;
  d.profile = wants_profile(d.placement);
  if (d.profile) profiles_asked_.insert(placement_id);
  d.after_step = advance_due_after_;
  return d;
}

}  // namespace placementd
