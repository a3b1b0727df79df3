#pragma once
// The part of config checking that needs the plugins: named plugins exist, and every
// [params.<kind>.<name>] table (global and per rule) suits its plugin.

#include <vector>

#include "config/config.h"
#include "plugins/plugin_registry.h"

namespace placementd {

/// Every problem, with the position of the key at fault.
std::vector<ConfigError> check_plugins(const Config& config, const PluginRegistry& registry);

}  // namespace placementd

namespace placementd {

/// Everything the daemon (at start and on reload), `placementd --check-config` and `placementctl
/// config check` verify: syntax, schema, then -- if the file could be read -- the plugins it names
/// and their hyperparameters, after scanning its [plugins].dirs into `registry`. Every error is
/// appended to `errors`, sorted by position.
Config load_and_check(const std::string& path, const std::string& default_plugin_dir,
                      PluginRegistry& registry, std::vector<ConfigError>& errors);

/// load_and_check() with the errors as "FILE:LINE:COL: message" lines; empty means valid.
std::vector<std::string> check_config_file(const std::string& path,
                                           const std::string& default_plugin_dir,
                                           PluginRegistry& registry);

}  // namespace placementd
