#pragma once
// Device topology files (TOML): the devices of a machine with memory and relative speed, and the
// links between them. tests/data/topologies/ has examples; docs/simulator.md the format.

#include <optional>
#include <string>

#include "placement/devices.h"

namespace placementd::sim {

/// The link from this node to the others of a data-parallel job (`[[link]] between = ["node",
/// "node"]`): what each step's gradient all-reduce crosses when replicas run on several nodes.
struct NodeLink {
  double bandwidth = 0.0;  // bytes/s, each direction
  double latency = 0.0;    // s per message
};

/// A topology file: the node's devices and their links, and the link between nodes if it names one.
struct Topology {
  placement::DeviceSet devices;
  std::optional<NodeLink> node_link;
};

/// Parses a topology file; throws ConfigInvalid listing every problem as FILE:LINE:COL.
Topology load_topology_file(const std::string& path);
/// The same from text; `name` stands for the file in messages.
Topology parse_topology_text(const std::string& text, const std::string& name);
/// The devices of load_topology_file / parse_topology_text.
placement::DeviceSet load_topology(const std::string& path);
placement::DeviceSet parse_topology(const std::string& text, const std::string& name);

}  // namespace placementd::sim
