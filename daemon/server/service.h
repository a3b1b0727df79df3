#pragma once
// What placementd does with each frame: the handshake, job sessions and the admin commands.
// Independent of the socket code (server.h), so it can be driven directly in tests.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "live/live_session.h"
#include "live/store.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "plugins/plugin_registry.h"

namespace placementd {

/// Who is on the other end of a connection (from SO_PEERCRED).
struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  /// uid 0 or a member of [daemon].admin_group.
  bool admin = false;
};

/// A job attached on some connection: its live session, and the strand its messages are handled
/// on (in the order they came, off the I/O thread).
struct AttachedJob {
  AttachedJob(uint64_t id, JobIdentity job, EffectivePolicy policy, const PluginRegistry& registry, Store& store,
              boost::asio::thread_pool::executor_type executor)
      : live(id, std::move(job), std::move(policy), registry, store), strand(std::move(executor)) {}
  LiveSession live;
  boost::asio::strand<boost::asio::thread_pool::executor_type> strand;
};

/// Per-connection protocol state, owned by the connection.
struct ConnectionState {
  Peer peer;
  uint16_t version = 0;  // 0 until Hello
  std::shared_ptr<AttachedJob> job;
};

/// How a handler answers: type, request id, body, and whether the stream must close afterwards.
/// May be called from a policy thread; the connection posts it to its I/O thread.
using Responder = std::function<void(placement::protocol::MessageType, uint32_t, nlohmann::json, bool)>;

/// Answers request `rid` with an error frame; a `fatal` one also closes the stream.
inline void reply_error(const Responder& respond, uint32_t rid, const char* code, const std::string& message,
                        bool fatal = false) {
  respond(placement::protocol::MessageType::kError, rid, placement::messages::Error{code, message, fatal}.to_json(),
          fatal);
}

/// Asks the daemon to reload its config (the same path as SIGHUP). Returns the errors, if any.
using ReloadHook = std::function<std::vector<std::string>()>;

class Service {
 public:
  Service(std::shared_ptr<const Config> config, PluginRegistry& registry, Store& store,
          std::string socket_path);
  ~Service();

  /// Handles one well-framed message. Never throws: problems become error frames.
  void handle(ConnectionState& conn, placement::protocol::MessageType type, uint32_t request_id,
              const nlohmann::json& body, const Responder& respond);

  /// The connection closed (detach or not): persist what the session measured and drop it.
  void disconnected(ConnectionState& conn);

  /// The config in force; replaced atomically by a reload.
  std::shared_ptr<const Config> config() const;
  void set_config(std::shared_ptr<const Config> config);
  void set_reload_hook(ReloadHook hook) { reload_ = std::move(hook); }

  /// Persists every session's best placement and policy state (SIGTERM) without blocking the
  /// caller: each session on its strand (after the policy work it is doing), then `done` with the
  /// number of sessions and of best placements new to the store, on the store's thread once the
  /// files are on disk.
  void persist_all(std::function<void(size_t jobs, size_t written)> done);

  size_t session_count() const;
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> frames_received{0};
  std::atomic<uint64_t> reports_received{0};
  std::atomic<uint64_t> protocol_errors{0};

 private:
  using json = nlohmann::json;
  void hello(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void attach(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void upload_graph(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void request_placement(ConnectionState& conn, uint32_t rid, const Responder& respond);
  void step_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void profile_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  /// Called on the job's strand once a reply went out: queues the session's deferred work (the
  /// warm start) behind it if some is due, and pushes the directive that work may end with.
  void defer_work(const std::shared_ptr<AttachedJob>& job, const Responder& respond);
  void detach(ConnectionState& conn, uint32_t rid, const Responder& respond);
  void status(ConnectionState& conn, uint32_t rid, const Responder& respond);
  void list_jobs(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void show_job(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond);
  void list_plugins(uint32_t rid, const Responder& respond);
  /// Runs `work` (which locks sessions to read them) off the I/O thread; what it throws becomes
  /// the request's error.
  void inspect(const ConnectionState& conn, uint32_t rid, const Responder& respond, std::function<void()> work);
  void reload(ConnectionState& conn, uint32_t rid, const Responder& respond);

  /// Sessions the peer may see: its own uid's, or all for an admin; with `finished`, the recently
  /// detached ones too.
  std::vector<std::shared_ptr<AttachedJob>> visible_sessions(const Peer& peer, bool finished = false) const;

  mutable std::mutex config_mutex_;
  std::shared_ptr<const Config> config_;
  PluginRegistry& registry_;
  Store& store_;
  std::string socket_path_;
  ReloadHook reload_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  /// Moves an ended session to the recently finished ones.
  void finish(const std::shared_ptr<AttachedJob>& job);

  mutable std::mutex sessions_mutex_;
  std::map<uint64_t, std::shared_ptr<AttachedJob>> sessions_;
  /// The last kFinishedKept detached sessions, oldest first (placementctl jobs --finished, jobs show).
  std::deque<std::shared_ptr<AttachedJob>> finished_;
  static constexpr size_t kFinishedKept = 32;
  uint64_t next_session_id_ = 1;

  /// Groupings and placements are computed here, never on the I/O thread.
  boost::asio::thread_pool policy_pool_;
};

}  // namespace placementd
