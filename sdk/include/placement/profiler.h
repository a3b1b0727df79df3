#pragma once
// Per-op cost measured during real training steps of a PlacedModule.

#include <functional>

#include "placement/engine.h"
#include "placement/graph.h"

namespace placement {

struct ProfileOptions {
  /// Steps run first and not measured (allocator warm-up, lazy initialisation).
  int warmup_steps = 2;
  /// Steps measured; each op's times are the median over them.
  int steps = 5;
};

/// Runs warmup_steps + steps real training steps of `module` under its current placement and
/// measures every op: forward time (from the previous op's end to its own, so interpreter work
/// between ops is counted; device synchronised on GPUs), backward time (the autograd nodes the op
/// created, timed by hooks while loss.backward() runs, each from the previous timed node's end),
/// its share of the optimizer update (the update's measured time split by parameter bytes) and the
/// bytes of its outputs kept for backward. `forward_backward` must run module.forward, compute the
/// loss and call backward; `update` must run the optimizer step (and zero the gradients). Returns
/// one OpProfile per op of module.graph(), each for the kind of device the op ran on.
std::vector<OpProfile> profile_steps(PlacedModule& module,
                                     const std::function<void()>& forward_backward,
                                     const std::function<void()>& update,
                                     const ProfileOptions& options = {});

/// Stores `profiles` in `graph` under the device kind each op was placed on in `module`.
void record_profiles(OpGraph& graph, const PlacedModule& module,
                     const std::vector<OpProfile>& profiles);

}  // namespace placement
