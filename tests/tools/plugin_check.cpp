// The load test every plugin gets (placement_add_plugin): load the built .so through the daemon's
// registry, check its kind and name, that its defaults pass its own validation, and that its
// factory builds an object.
//
//   placement_plugin_check KIND NAME FILE

#include <iostream>

#include "placement/plugin.h"
#include "plugins/plugin_registry.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: placement_plugin_check KIND NAME FILE\n";
    return 2;
  }
  try {
    const auto kind = placement::plugin_kind_from_string(argv[1]);
    const std::string name = argv[2];
    placementd::PluginRegistry registry;
    if (const std::string reason = registry.load_file(argv[3]); !reason.empty()) {
      std::cerr << argv[3] << ": " << reason << "\n";
      return 1;
    }
    if (!registry.has(kind, name)) {
      std::cerr << argv[3] << ": does not provide " << argv[1] << " '" << name << "'\n";
      return 1;
    }
    if (auto errors = registry.check_params(kind, name, {}); !errors.empty()) {
      std::cerr << argv[3] << ": defaults rejected: " << errors[0].name << ": " << errors[0].message
                << "\n";
      return 1;
    }
    bool created = false;
    switch (kind) {
      case placement::PluginKind::kGrouper:
        created = registry.create_grouper(name, {}) != nullptr;
        break;
      case placement::PluginKind::kPlacer:
        created = registry.create_placer(name, {}) != nullptr;
        break;
      case placement::PluginKind::kAlgorithm:
        created = registry.create_algorithm(name, {}) != nullptr;
        break;
    }
    if (!created) return 1;
    std::cout << argv[3] << ": " << argv[1] << " '" << name << "' OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << argv[3] << ": " << e.what() << "\n";
    return 1;
  }
}
