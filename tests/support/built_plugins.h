#pragma once
// The plugins this build made, scanned once per test process.

#include "plugins/plugin_registry.h"

namespace placementd::offline {

inline const PluginRegistry& built_plugins() {
  static PluginRegistry* r = [] {
    auto* registry = new PluginRegistry;
    registry->scan({PLUGIN_DIR});
    return registry;
  }();
  return *r;
}

}  // namespace placementd::offline
