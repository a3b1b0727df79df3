#pragma once
// Named device figures a topology file can refer to (spec = "h100-sxm"), from vendors' data sheets.

#include <optional>
#include <string>
#include <vector>

#include "placement/devices.h"

namespace placementd::sim {

struct DevicePreset {
  std::string name;
  placement::DeviceKind kind;
  /// Memory of the product, bytes (a topology's memory_gib overrides it).
  uint64_t memory_bytes = 0;
  placement::DeviceSpec spec;
  /// Where the figures come from.
  std::string source;
};

/// Every preset, in the order docs/simulator.md lists them.
const std::vector<DevicePreset>& device_presets();
/// The preset named `name`, or nullptr.
const DevicePreset* find_device_preset(const std::string& name);

}  // namespace placementd::sim
