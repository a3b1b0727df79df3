#pragma once
// Device topology files (TOML): the devices of a machine with memory and relative speed, and the
// links between them. tests/data/topologies/ has examples; docs/simulator.md the format.

#include <string>

#include "placement/devices.h"

namespace placementd::sim {

/// Parses a topology file; throws ConfigInvalid listing every problem as FILE:LINE:COL.
placement::DeviceSet load_topology(const std::string& path);
/// The same from text; `name` stands for the file in messages.
placement::DeviceSet parse_topology(const std::string& text, const std::string& name);

}  // namespace placementd::sim
