#pragma once
// What the handlers share: the config in force, the plugins, the store, the jobs, the counters and
// the policy threads. One per daemon, owned by the Service.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "config/config.h"
#include "live/store.h"
#include "plugins/plugin_registry.h"
#include "server/counters.h"
#include "server/fair_share.h"
#include "server/job_table.h"
#include "server/policy_latency.h"
#include "server/uid_log_limit.h"

namespace placementd {

/// Asks the daemon to reload its config (the same path as SIGHUP). Returns the errors, if any.
using ReloadHook = std::function<std::vector<std::string>()>;

class ServiceContext {
 public:
  ServiceContext(std::shared_ptr<const Config> config, PluginRegistry& registry, Store& store,
                 std::string socket_path)
      : registry(registry),
        store(store),
        socket_path(std::move(socket_path)),
        policy_pool(static_cast<size_t>(config->policy_threads)),
        policy_share(static_cast<size_t>(config->policy_threads),
                     static_cast<size_t>(config->policy_share_per_uid())),
        config_(std::move(config)) {}
  /// Policy work still queued finishes before the jobs and plugins it uses go.
  ~ServiceContext() { policy_pool.join(); }

  /// The config in force; replaced atomically by a reload.
  std::shared_ptr<const Config> config() const {
    std::lock_guard<std::mutex> lock(config_mutex_);
    return config_;
  }
  void set_config(std::shared_ptr<const Config> config) {
    std::lock_guard<std::mutex> lock(config_mutex_);
    config_ = std::move(config);
  }

  PluginRegistry& registry;
  Store& store;
  const std::string socket_path;
  ReloadHook reload;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  Counters counters;
  PolicyLatency policy_latency;
  /// What a client makes the daemon log, per uid (the server writes the summaries).
  UidLogLimit log_limit;
  /// Groupings and placements are computed here, never on the I/O thread.
  boost::asio::thread_pool policy_pool;
  /// Who of the users with requests waiting gets the next policy thread (every request of a
  /// client goes through it; the daemon's own work, persisting and metrics, does not).
  FairShare policy_share;
  /// Declared after the pool, so destroyed before it: each job's strand belongs to the pool.
  JobTable jobs;

 private:
  mutable std::mutex config_mutex_;
  std::shared_ptr<const Config> config_;
};

}  // namespace placementd
