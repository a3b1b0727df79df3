#pragma once
// A device's cost-model figures read from TOML: a topology file's [[device]] tables and the
// daemon's [devices] cpu_spec / cuda_spec share the keys and their checks. Separate from topology.h
// so that the users of topologies do not compile toml++.

#include <string>
#include <vector>

#include "placement/devices.h"
#include "toml/toml_checker.h"

namespace placementd::sim {

/// A device's cost-model figures from the keys of table `t` (`spec` = a preset's name, and/or
/// fp32_tflops, memory_bandwidth_gbs, ...: docs/simulator.md), into d.spec; a preset also gives
/// d.memory_bytes unless `t` has memory_gib. Problems are reported through `c`, positioned and
/// prefixed with `where`; d.spec is then left as it was.
void read_device_spec(TomlChecker& c, const toml::table& t, const std::string& where,
                      placement::Device& d);
/// The presets' names, comma-separated, for messages.
std::string preset_names();
/// The keys read_device_spec() reads, with `others` (the table's own keys) before them: for
/// TomlChecker::only.
std::vector<const char*> device_spec_keys(std::initializer_list<const char*> others);

}  // namespace placementd::sim
