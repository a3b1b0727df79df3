#pragma once
// The LibTorch device behind one of placementd's (logical CPU devices all map to the host).

#include <c10/core/Device.h>

#include "placement/devices.h"

namespace placement::detail {

inline c10::Device physical(const Device& d) {
  return d.kind == DeviceKind::kCuda
             ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(d.index))
             : c10::Device(c10::DeviceType::CPU);
}

}  // namespace placement::detail
