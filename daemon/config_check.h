#pragma once
// The part of config checking that needs the plugins: named plugins exist, and every
// [params.<kind>.<name>] table (global and per rule) suits its plugin.

#include <vector>

#include "config.h"
#include "plugin_registry.h"

namespace placementd {

/// Every problem, with the position of the key at fault.
std::vector<ConfigError> check_plugins(const Config& config, const PluginRegistry& registry);

}  // namespace placementd

namespace placementd {

/// Everything `placementd --check-config` and `placementctl config check` verify: syntax, schema,
/// then the named plugins and their hyperparameters (plugins are loaded from the file's
/// [plugins].dirs). Returns the errors as "FILE:LINE:COL: message" lines; empty means valid.
/// `registry` receives the plugins loaded on the way.
std::vector<std::string> check_config_file(const std::string& path, const std::string& default_plugin_dir,
                                           PluginRegistry& registry);

}  // namespace placementd
