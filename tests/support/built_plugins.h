#pragma once
// The plugins this build made, scanned once per test process.

#include "plugins/plugin_registry.h"

namespace placementd {

namespace offline {

inline const PluginRegistry& built_plugins() {
  static PluginRegistry* r = [] {
    auto* registry = new PluginRegistry;
    registry->scan({PLUGIN_DIR});
    return registry;
  }();
  return *r;
}

}  // namespace offline

/// The built plugins and the test plugins (tests/plugins: the throwing ones and their kin).
inline PluginRegistry& built_and_test_plugins() {
  static PluginRegistry* r = [] {
    auto* registry = new PluginRegistry;
    registry->scan({PLUGIN_DIR, TEST_PLUGIN_DIR});
    return registry;
  }();
  return *r;
}

}  // namespace placementd
