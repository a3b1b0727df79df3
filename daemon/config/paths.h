#pragma once
// Where an installed or a just-built placementd finds its plugins and config.

#include <filesystem>
#include <optional>
#include <string>

namespace placementd {

/// <exe>/../lib/placementd/plugins (an install, or the build tree, which mirrors it), else the
/// compile-time install location.
std::string default_plugin_dir();
/// The config an install of this executable laid out (config_path_for_executable), else the
/// compile-time default (a binary run from its build tree).
std::string default_config_path();
/// Where `cmake --install` puts the config for a binary installed at `exe`: P/bin/placementd
/// reads /etc/placementd/placementd.toml when P is /usr, P/etc/placementd/placementd.toml
/// otherwise. nullopt for a binary that is not in an installed bin/ (a build tree, which has
/// CMakeCache.txt where an install has its prefix).
std::optional<std::filesystem::path> config_path_for_executable(const std::filesystem::path& exe);

}  // namespace placementd
