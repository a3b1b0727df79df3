#include "planning/sim/profile_scaling.h"

#include <stdexcept>

namespace placementd::sim {

void scale_profile(placement::OpGraph& graph, const std::string& from, const std::string& to, double speedup) {
  if (!(speedup > 0)) throw std::invalid_argument("a profile speedup must be positive, got " + std::to_string(speedup));
  for (placement::Op& op : graph.ops)
    if (auto it = op.profile.find(from); it != op.profile.end()) {
      placement::OpProfile scaled = it->second;
      scaled.forward_s /= speedup;
      scaled.backward_s /= speedup;
      scaled.update_s /= speedup;
      op.profile[to] = scaled;
    }
}

}  // namespace placementd::sim
