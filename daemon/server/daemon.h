#pragma once
// placementd as a whole: config, plugins, store, service and server wired together, with the
// signal handling and systemd protocol around them. main() only parses the command line.

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "config/config.h"
#include "live/store.h"
#include "plugins/plugin_registry.h"
#include "server/lock_file.h"
#include "server/metrics_server.h"
#include "server/server.h"
#include "server/service.h"

namespace placementd {

struct DaemonOptions {
  std::string config_path;
  /// Overrides the config's socket / state dir when not empty.
  std::string socket;
  std::string state_dir;
  /// The directory plugins are searched in when the config names none.
  std::string default_plugin_dir;
};

class Daemon {
 public:
  /// Loads config and plugins, checks them, opens the store. Throws ConfigInvalid or
  /// std::runtime_error with the reason; nothing is listening yet.
  explicit Daemon(const DaemonOptions& options);
  ~Daemon();

  /// Opens (or adopts) the socket, tells systemd READY=1, and serves until SIGTERM/SIGINT.
  /// Returns the process exit code.
  int run();

  /// Re-reads the config file and rescans plugins; on any error the old config stays. Returns the
  /// errors (empty on success). Runs on the I/O thread (SIGHUP or the reload command).
  std::vector<std::string> reload();

 private:
  void wait_signals();
  void shutdown(const char* why);
  /// During a stop: a second SIGTERM or SIGINT, or the stop's deadline, ends the process at once.
  void wait_second_signal();
  [[noreturn]] static void exit_now(const std::string& why);

  DaemonOptions options_;
  std::shared_ptr<const Config> config_;
  std::string socket_path_;
  /// The listening socket systemd passed, or -1.
  int activated_fd_ = -1;
  PluginRegistry registry_;
  // Declared before what writes the state and serves the socket: released after them (members
  // go in reverse order), so no write follows the release of the state directory's lock.
  std::unique_ptr<LockFile> lock_;  // the socket's (none under socket activation: systemd owns it)
  std::unique_ptr<LockFile> state_lock_;
  std::unique_ptr<Store> store_;
  boost::asio::io_context io_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Server> server_;
  /// The Prometheus endpoint, when [metrics].listen names one.
  std::unique_ptr<MetricsServer> metrics_;
  boost::asio::signal_set signals_;
};

/// Applies [logging] to spdlog (stderr; no timestamps under journald, which adds its own).
void configure_logging(const Config& config);

}  // namespace placementd
