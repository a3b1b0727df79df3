#pragma once
// Op times on a device kind a job has not profiled an op on, from its times on another kind.
//
// A job whose start spreads its ops over a CPU and a GPU profiles each op on the one device it ran
// on, and the all-on-GPU candidate after it adds the GPU's times of the rest: the ops that started
// on the GPU are never timed on the CPU unless a candidate puts them there. The simulator warm
// start needs every op timed on every kind it may place it on; without a cost-model spec for the
// kind ([devices] cpu_spec, cuda_spec) it could time no placement but the ones that ran.

#include <cstddef>
#include <string>
#include <vector>

#include "placement/graph.h"

namespace placementd {

/// `op`'s profile on `kind` when a job measured it (not one this file filled); nullptr otherwise.
const placement::OpProfile* measured_profile(const placement::Op& op, const std::string& kind);
/// Whether `op` may be placed on `kind`: it is not pinned to another.
bool may_run_on(const placement::Op& op, const std::string& kind);

/// Fills each op's missing profile on each of `kinds` from its measured profile on another of
/// them, scaled by how much slower ops of its kind ("aten::addmm") ran on the one than on the
/// other where both were measured: the median ratio of their step times (forward and backward
/// together), or of all ops' together where none of its kind was measured on both. The profiles
/// it fills are `predicted`, and it drops the ones an earlier call filled first, so a measurement
/// since then wins. Ops pinned to a kind, and ops no kind measured, are left alone. Returns how
/// many profiles it filled.
size_t fill_profile_gaps(placement::OpGraph& graph, const std::vector<std::string>& kinds);

}  // namespace placementd
