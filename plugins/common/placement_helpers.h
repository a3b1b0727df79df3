#pragma once
// Small decisions several plugins make the same way. Header-only: plugins never load one another.

#include <algorithm>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"

namespace placement::plugins {

/// Forward + backward time of `op` on its fastest profiled device kind, in microseconds; 0 when
/// the op has no profile.
inline double fastest_compute_micros(const Op& op) {
  double micros = 0;
  for (const auto& [kind, p] : op.profile) {
    const double t = (p.forward_s + p.backward_s) * 1e6;
    micros = micros == 0 ? t : std::min(micros, t);
  }
  return micros;
}

/// Indices of the devices a baseline places on: the CUDA devices when `gpus_only` and the job has
/// any (the papers' setting), otherwise all of them.
inline std::vector<int> usable_devices(const DeviceSet& devices, bool gpus_only) {
  std::vector<int> usable;
  if (gpus_only)
    for (size_t d = 0; d < devices.size(); ++d)
      if (devices.devices[d].kind == DeviceKind::kCuda) usable.push_back(static_cast<int>(d));
  if (usable.empty())
    for (size_t d = 0; d < devices.size(); ++d) usable.push_back(static_cast<int>(d));
  return usable;
}

}  // namespace placement::plugins
