#pragma once
// Where an installed or a just-built placementd finds its plugins and config.

#include <string>

namespace placementd {

/// <exe>/../lib/placementd/plugins (an install, or the build tree, which mirrors it), else the
/// compile-time install location.
std::string default_plugin_dir();
/// The compile-time default config path (/etc/placementd/placementd.toml for a /usr install).
std::string default_config_path();

}  // namespace placementd
