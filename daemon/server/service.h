#pragma once
// What placementd does with each frame: checks who may send it, then runs its handler where the
// handler table says (handlers.h). The job's messages are in job_handlers.cpp, placementctl's in
// admin_handlers.cpp. Independent of the socket code (server.h), so tests drive it directly.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"

#include "server/connection_state.h"
#include "server/handlers.h"
#include "server/service_context.h"

namespace placementd {

class Service {
 public:
  Service(std::shared_ptr<const Config> config, PluginRegistry& registry, Store& store,
          std::string socket_path);
  /// Waits for the policy work in flight: no handler outlives the service.
  ~Service();

  /// Handles one well-framed message on the I/O thread. Never throws: problems become error frames.
  /// `decoded_bytes` is what its payload weighed (protocol::weigh_payload): while the request waits
  /// for a strand or the policy pool it counts in its user's backlog.
  void handle(ConnectionState& conn, placement::protocol::MessageType type, uint32_t request_id,
              nlohmann::json body, const Responder& respond, uint64_t decoded_bytes);

  /// Whether a frame of `type` on this connection is decoded where its handler runs rather than on
  /// the I/O thread every connection shares: each request past the hello whose handler runs on a
  /// job's strand or a policy thread (a graph upload takes hundreds of milliseconds to decode).
  bool decodes_where_it_runs(const ConnectionState& conn,
                             placement::protocol::MessageType type) const;
  /// handle() for such a frame, its payload weighed (`weight`) and not yet decoded: the access
  /// checks run here, and the decoding (a graph upload counted against [limits] first) on the
  /// handler's thread in its user's turn, its failures answered as handle() answers them.
  void handle_payload(ConnectionState& conn, placement::protocol::MessageType type,
                      uint32_t request_id, std::vector<uint8_t> payload,
                      const placement::protocol::PayloadWeight& weight, const Responder& respond);

  /// The connection closed (detach or not): persist what its job measured and end the job.
  void disconnected(ConnectionState& conn);

  std::shared_ptr<const Config> config() const { return ctx_.config(); }
  void set_config(std::shared_ptr<const Config> config) { ctx_.set_config(std::move(config)); }
  void set_reload_hook(ReloadHook hook) { ctx_.reload = std::move(hook); }

  /// Persists every job's best placement and policy state (SIGTERM) without blocking the caller:
  /// each job on its strand (after the policy work it is doing), then `done` with the number of
  /// jobs and of best placements new to the store, on the store's thread once the files are on
  /// disk.
  void persist_all(std::function<void(size_t jobs, size_t written)> done);

  /// The Prometheus text of the daemon and its jobs (metrics.h); waits on the jobs' locks, so it
  /// is rendered on policy_pool().
  std::string metrics_text() const;
  boost::asio::thread_pool& policy_pool() { return ctx_.policy_pool; }

  size_t session_count() const { return ctx_.jobs.attached_count(); }
  Counters& counters() { return ctx_.counters; }
  UidLogLimit& log_limit() { return ctx_.log_limit; }
  const HandlerTable& handlers() const { return handlers_; }

 private:
  /// Throws RequestError (over_limit), and logs why, when a graph upload's payload counts more
  /// than [limits] allow (server/graph_limits.h); one not shaped like a graph goes on.
  void refuse_graph_over_limits(const Request& req, const std::vector<uint8_t>& payload);
  /// Refuses the request (RequestError) unless the connection may send it now.
  void check_access(const ConnectionState& conn, const Route& route) const;
  /// Checks the request and runs its handler where its route says, after `fill` gave it its body
  /// (inline for a handler on the I/O thread, on the handler's thread otherwise).
  template <class Fill>
  void dispatch(ConnectionState& conn, placement::protocol::MessageType type, uint32_t request_id,
                const Responder& respond, uint64_t decoded_bytes, Fill fill);
  /// Runs a handler off the I/O thread, `fill` first; what either throws becomes the request's
  /// error frame.
  template <class Fill>
  void run_guarded(const Route& route, Request& request, Fill& fill);

  ServiceContext ctx_;
  HandlerTable handlers_;
};

}  // namespace placementd
