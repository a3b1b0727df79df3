#pragma once
// Small synthetic graphs and device sets with known structure, for unit tests.

#include "placement/devices.h"
#include "placement/graph.h"

#include <string>

namespace placement::testing {

/// n ops in a chain: 0 -> 1 -> ... -> n-1; each output `bytes` bytes.
OpGraph chain(int n, uint64_t bytes = 1024);
/// Two independent chains of `length` ops that meet in a final "join" op.
OpGraph two_chains(int length);
/// A recurrent stack unrolled over time, as the Hierarchical Planner's largest graphs (83 712 ops):
/// `layers` rows of `ops / layers` cells, each cell fed by the previous step of its layer and the
/// same step of the layer below, profiled on cpu and cuda. Colocation leaves one group per cell of
/// most steps, so it stresses every per-group structure.
OpGraph unrolled_stack(int ops, int layers = 4);
/// Gives every op the same profile on `kind` (forward; backward twice that).
void profile_all(OpGraph& graph, DeviceKind kind, double forward_s);
/// Gives every op the work of a matrix product of `forward_flops` (backward twice that) moving
/// `bytes` each way, and `parameter_bytes` of parameters: what capture records, without a profile.
void give_work(OpGraph& graph, double forward_flops, double bytes, uint64_t parameter_bytes);
/// `count` devices of `kind` with `memory` bytes each, uniform 10 GB/s links.
DeviceSet devices(int count, DeviceKind kind = DeviceKind::kCpu, uint64_t memory = 1ull << 30);

}  // namespace placement::testing
