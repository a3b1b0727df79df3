// placementd: the per-node placement daemon. Runs in the foreground and logs to stderr, as systemd
// expects.

#include <iostream>

#include <CLI/CLI.hpp>

#include "config/config_check.h"
#include "config/paths.h"
#include "server/daemon.h"
#include "server/version.h"

int main(int argc, char** argv) {
  CLI::App app{
      "placementd: learns where each operation of a training job should run, while it trains"};
  placementd::DaemonOptions options;
  options.config_path = placementd::default_config_path();
  options.default_plugin_dir = placementd::default_plugin_dir();
  std::string check;
  app.add_option("-c,--config", options.config_path, "config file")->capture_default_str();
  app.add_option("--socket", options.socket, "Unix socket path (overrides daemon.socket)");
  app.add_option("--state-dir", options.state_dir, "state directory (overrides daemon.state_dir)");
  app.add_option("--check-config", check,
                 "check a config file (and its plugins), print every error, and exit");
  app.set_version_flag("--version", std::string("placementd ") + placementd::kVersion + " (" +
                                        placementd::kBuildFeatures + ")");
  CLI11_PARSE(app, argc, argv);

  if (!check.empty()) {
    placementd::PluginRegistry registry;
    const auto errors = placementd::check_config_file(check, options.default_plugin_dir, registry);
    for (const auto& e : errors) std::cerr << e << "\n";
    if (!errors.empty()) return 1;
    std::cout << check << ": OK (" << registry.plugins().size() << " plugins)\n";
    return 0;
  }
  try {
    placementd::Daemon daemon(options);
    return daemon.run();
  } catch (const placementd::ConfigInvalid& e) {
    std::cerr << "placementd: invalid configuration:\n" << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "placementd: " << e.what() << "\n";
    return 1;
  }
}
