#include "server/daemon.h"

#include <malloc.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "config/config_check.h"
#include "placement/client.h"
#include "server/journal_sink.h"
#include "server/systemd.h"
#include "server/version.h"

namespace placementd {

void configure_logging(const Config& config) {
  // Under systemd stderr is the journal: write to it natively, with fields, instead.
  static const bool journal =
      journal_sink_available() && is_journal_stream(std::getenv("JOURNAL_STREAM"), 2);
  static bool installed = false;
  if (!installed) {
    if (journal)
      spdlog::set_default_logger(
          std::make_shared<spdlog::logger>("placementd", std::make_shared<JournalSink>()));
    else
      spdlog::set_default_logger(spdlog::stderr_logger_mt("placementd"));
    installed = true;
  }
  // journald timestamps lines and keeps the priority itself; elsewhere we add both.
  spdlog::set_pattern(journal ? "%v" : "%Y-%m-%d %H:%M:%S.%e %l %v");
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::flush_on(spdlog::level::info);
}

namespace {

// The path a listening Unix socket is bound to (for status and logs of an activated daemon).
std::string bound_path(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_path[0] == '\0')
    return "(socket passed by systemd)";
  return addr.sun_path;
}

ServerLimits limits_from(const Config& c) {
  return {c.max_frame_bytes,
          c.max_connections,
          c.max_connections_per_uid,
          c.frame_timeout_ms,
          c.idle_timeout_ms,
          kMaxQueuedReplyBytes,
          c.admin_group,
          static_cast<size_t>(c.max_buffered_bytes),
          static_cast<uint64_t>(c.max_pending_bytes_per_uid),
          c.limits};
}

}  // namespace

Daemon::Daemon(const DaemonOptions& options) : options_(options), signals_(io_) {
  // Blocks of 4 MiB and more are mapped, and unmapped when freed: a client's large frame gives its
  // memory back once handled. (glibc's own threshold grows to 32 MiB after the first such free,
  // and freed heap blocks stay with the process.)
#ifdef __GLIBC__
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
  std::vector<ConfigError> errors;
  config_ = std::make_shared<Config>(
      load_and_check(options.config_path, options.default_plugin_dir, registry_, errors));
  if (!errors.empty()) throw ConfigInvalid(std::move(errors));
  configure_logging(*config_);
  activated_fd_ = systemd::activated_socket();
  socket_path_ = activated_fd_ >= 0         ? bound_path(activated_fd_)
                 : !options.socket.empty()  ? options.socket
                 : !config_->socket.empty() ? config_->socket
                                            : placement::default_socket_path();
  const std::string state_dir = !options.state_dir.empty()    ? options.state_dir
                                : !config_->state_dir.empty() ? config_->state_dir
                                                              : default_state_dir();
  store_ = std::make_unique<Store>(state_dir);
  store_->set_max_bytes_per_uid(static_cast<uint64_t>(config_->max_state_bytes_per_uid));
  service_ = std::make_unique<Service>(config_, registry_, *store_, socket_path_);
  service_->set_reload_hook([this] { return reload(); });
  server_ = std::make_unique<Server>(io_, *service_);
  server_->set_limits(limits_from(*config_));
}

Daemon::~Daemon() = default;

int Daemon::run() {
  // First: a metrics address that cannot be bound fails the start before the job socket exists.
  if (!config_->metrics_listen.empty()) {
    const ListenAddress address = parse_listen_address(config_->metrics_listen);
    metrics_ = std::make_unique<MetricsServer>(io_, service_->policy_pool(),
                                               [this] { return service_->metrics_text(); });
    metrics_->listen(address, config_->socket_mode);
    spdlog::info("metrics on {}{}/metrics",
                 address.kind == ListenAddress::Kind::kTcp ? "http://" : "", address.str());
  }
  const int fd = activated_fd_;
  if (fd < 0) lock_ = LockFile::for_socket(socket_path_);
  // Two daemons on one state directory would overwrite each other's results, whoever started them
  // (systemd's socket activation and an admin by hand).
  state_lock_ = LockFile::for_state_dir(store_->dir());
  if (fd >= 0) {
    server_->adopt(fd);
    spdlog::info("using the socket systemd passed (fd {})", fd);
  } else {
    server_->listen(socket_path_, config_->socket_mode);
  }
  wait_signals();
  const size_t plugins = registry_.plugins().size();
  spdlog::info("placementd {} ready on {} ({} plugins, state in {}, config {})", kVersion,
               socket_path_, plugins, store_->dir(), config_->path);
  systemd::notify("READY=1\nSTATUS=serving on " + socket_path_ + " with " +
                  std::to_string(plugins) + " plugins");
  // Handlers turn their own errors into error frames; anything that still escapes is logged and
  // the loop goes on, so one bad request never stops the daemon.
  for (;;) {
    try {
      io_.run();
      break;
    } catch (const std::exception& e) {
      spdlog::error("unexpected error in the I/O loop: {}", e.what());
    }
  }
  if (fd < 0) ::unlink(socket_path_.c_str());
  spdlog::info("placementd stopped");
  return 0;
}

void Daemon::wait_signals() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.add(SIGHUP);
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo == SIGHUP) {
      reload();
      wait_signals();
      return;
    }
    shutdown(signo == SIGTERM ? "SIGTERM" : "SIGINT");
  });
}

void Daemon::shutdown(const char* why) {
  spdlog::info("{}: stopping", why);
  systemd::notify("STOPPING=1");
  server_->stop_accepting();
  if (metrics_) metrics_->stop();
  // Each session persists on its strand, after the policy work it is doing; the I/O thread serves
  // the open connections meanwhile and closes them once the files are on disk.
  service_->persist_all([this](size_t jobs, size_t written) {
    boost::asio::post(io_, [this, jobs, written] {
      spdlog::info("persisted the state of {} job(s) in {} ({} new best placement(s))", jobs,
                   store_->dir(), written);
      server_->close_all();
      io_.stop();
    });
  });
  // Policy work in flight (a warm start may run minutes) and a disk that hangs must not hold the
  // stop until systemd's SIGKILL: past the deadline the daemon exits without them. A thread of its
  // own, so the deadline also holds once the I/O loop has ended (joining the policy threads).
  const int64_t timeout_ms = config_->stop_timeout_ms;
  std::thread([timeout_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    exit_now(
        "the daemon had not stopped " + std::to_string(timeout_ms) +
        " ms after the signal (daemon.stop_timeout_ms: policy work still running, or a slow disk)");
  }).detach();
  wait_second_signal();
}

void Daemon::wait_second_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo == SIGHUP) {  // no reload while stopping
      wait_second_signal();
      return;
    }
    exit_now(std::string("a second ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT"));
  });
}

void Daemon::exit_now(const std::string& why) {
  // Files already written are whole (each write is a rename); what was still queued is lost, and
  // the next daemon removes the temporaries of writes cut short. Destructors would wait for the
  // very policy threads and writes this exit does not wait for.
  spdlog::error("{}: exiting now; what was not yet written is lost", why);
  spdlog::default_logger()->flush();
  std::_Exit(1);
}

std::vector<std::string> Daemon::reload() {
  systemd::notify("RELOADING=1");
  std::vector<std::string> errors;
  try {
    std::vector<ConfigError> found;
    // The new config's plugins are judged with it: a refused file changes nothing the daemon
    // offers.
    PluginRegistry staged;
    auto next = std::make_shared<Config>(
        load_and_check(options_.config_path, options_.default_plugin_dir, staged, found));
    for (const ConfigError& e : found) errors.push_back(e.str());
    if (errors.empty()) {
      registry_.adopt(staged);
      if (next->socket != config_->socket)
        spdlog::warn("daemon.socket changed: this takes a restart");
      if (next->state_dir != config_->state_dir)
        spdlog::warn("daemon.state_dir changed: this takes a restart");
      if (next->metrics_listen != config_->metrics_listen)
        spdlog::warn("metrics.listen changed: this takes a restart");
      configure_logging(*next);
      config_ = next;
      service_->set_config(next);
      server_->set_limits(limits_from(*next));
      store_->set_max_bytes_per_uid(static_cast<uint64_t>(next->max_state_bytes_per_uid));
      spdlog::info("reloaded {} ({} plugins)", next->path, registry_.plugins().size());
    }
  } catch (const std::exception& e) {
    errors.push_back(e.what());
  }
  if (!errors.empty()) {
    spdlog::error("reload refused, the old config stays in force:");
    for (const std::string& e : errors) spdlog::error("  {}", e);
  }
  systemd::notify("READY=1");
  return errors;
}

}  // namespace placementd
