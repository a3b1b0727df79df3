#pragma once
// Waiting for the GPUs a job uses before a clock is read: their work is asynchronous, and
// torch::cuda::synchronize() without an index waits only for the calling thread's current device.

#include <set>

#include <torch/cuda.h>

#include "placement/devices.h"

namespace placement::detail {

inline void synchronize_cuda_devices(const DeviceSet& devices) {
  std::set<int> waited;
  for (const Device& d : devices.devices)
    if (d.kind == DeviceKind::kCuda && waited.insert(d.index).second)
      torch::cuda::synchronize(d.index);
}

}  // namespace placement::detail
