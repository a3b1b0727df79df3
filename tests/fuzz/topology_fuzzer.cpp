// libFuzzer target: a device topology file (placementctl simulate --devices,
// tests/data/topologies): every fault is a ConfigInvalid that lists FILE:LINE:COL problems, nothing
// else.

#include <cstddef>
#include <cstdint>
#include <string>

#include "planning/sim/topology.h"
#include "toml/source_pos.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    placementd::sim::parse_topology_text(std::string(reinterpret_cast<const char*>(data), size),
                                         "fuzz.toml");
  } catch (const placementd::ConfigInvalid&) {
  }
  return 0;
}
