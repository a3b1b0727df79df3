// The dispatcher: the handshake, the access checks every handler relies on, and the guard around
// handlers that run off the I/O thread.
#include "server/service.h"

#include <optional>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "live/request_error.h"
#include "placement/serialization.h"
#include "server/admin_handlers.h"
#include "server/graph_limits.h"
#include "server/heap_trim.h"
#include "server/job_handlers.h"
#include "server/job_log.h"
#include "server/metrics.h"
#include "server/policy_priority.h"
#include "server/version.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
namespace messages = placement::messages;
using nlohmann::json;

namespace {

void hello(ServiceContext& ctx, ConnectionState& conn, Request& req) {
  messages::Hello hello;
  try {
    hello = messages::Hello::from_json(req.body);
  } catch (const placement::FormatError& e) {
    // Without a version there is no protocol to answer in: the connection ends.
    reply_error(req.respond, req.id, error::kBadPayload, std::string("hello: ") + e.what(), true);
    return;
  }
  const uint64_t lo = hello.min_version, hi = hello.max_version;
  const uint64_t chosen = std::min<uint64_t>(hi, placement::protocol::kMaxVersion);
  if (lo > hi || chosen < lo || chosen < placement::protocol::kMinVersion) {
    reply_error(req.respond, req.id, error::kUnsupportedVersion,
                "client speaks protocol versions " + std::to_string(lo) + ".." +
                    std::to_string(hi) + ", this placementd speaks " +
                    std::to_string(placement::protocol::kMinVersion) + ".." +
                    std::to_string(placement::protocol::kMaxVersion),
                true);
    return;
  }
  conn.version = static_cast<uint16_t>(chosen);
  const messages::Welcome welcome{conn.version, std::string("placementd ") + kVersion,
                                  ctx.config()->max_frame_bytes, conn.peer.uid, conn.peer.admin};
  req.respond(welcome.kType, req.id, welcome.to_json(), false);
}

// A failed request's error frame: RequestError with its code, FormatError as bad_payload,
// anything else as internal (and logged: it is the daemon's fault, not the client's).
void reply_failure(Counters& counters, UidLogLimit& log_limit, const Request& req,
                   const std::exception_ptr& failure) {
  counters.protocol_error();
  std::string what = placement::protocol::to_string(req.type);
  if (req.job)
    what = "job " + std::to_string(req.job->live.id()) + " '" + req.job->live.name() + "': " + what;
  try {
    std::rethrow_exception(failure);
  } catch (const RequestError& e) {
    reply_error(req.respond, req.id, e.code, e.what());
  } catch (const placement::FormatError& e) {
    reply_error(req.respond, req.id, error::kBadPayload, e.what());
  } catch (const std::exception& e) {
    log_limit.log(
        spdlog::level::err, req.peer.uid,
        fmt::format("uid {} pid {}: {} failed: {}", req.peer.uid, req.peer.pid, what, e.what()));
    reply_error(req.respond, req.id, error::kInternal, e.what());
  } catch (...) {
    log_limit.log(spdlog::level::err, req.peer.uid,
                  fmt::format("uid {} pid {}: {} failed with an exception that is not a "
                              "std::exception",
                              req.peer.uid, req.peer.pid, what));
    reply_error(req.respond, req.id, error::kInternal, what + " failed");
  }
}

}  // namespace

Service::Service(std::shared_ptr<const Config> config, PluginRegistry& registry, Store& store,
                 std::string socket_path)
    : ctx_(std::move(config), registry, store, std::move(socket_path)) {
  handlers_.add(MessageType::kHello, on_io_thread(Access::kHandshake, "saying hello",
                                                  [this](ConnectionState& conn, Request& req) {
                                                    hello(ctx_, conn, req);
                                                  }));
  add_job_handlers(handlers_, ctx_);
  add_admin_handlers(handlers_, ctx_);
  for (MessageType type : handlers_.types())
    if (handlers_.find(type)->runs != Runs::kIoThread) ctx_.policy_latency.add(type);
  const auto cfg = ctx_.config();
  try {
    nice_pool_threads(ctx_.policy_pool, static_cast<int>(cfg->policy_threads),
                      static_cast<int>(cfg->policy_nice));
  } catch (const std::runtime_error& e) {
    // The daemon still works; policy work then competes with the jobs at full priority.
    spdlog::warn("{} (daemon.policy_nice); policy work runs at the daemon's own priority",
                 e.what());
  }
}

Service::~Service() { ctx_.policy_pool.join(); }

void Service::check_access(const ConnectionState& conn, const Route& route) const {
  switch (route.access) {
    case Access::kHandshake:
      if (conn.version != 0) throw RequestError(error::kUnexpected, "hello was already received");
      break;
    case Access::kAnyone:
      break;
    case Access::kUnattached:
      if (conn.job)
        throw RequestError(error::kUnexpected, "this connection is already attached as job " +
                                                   std::to_string(conn.job->live.id()));
      break;
    case Access::kAttached:
      if (!conn.job) throw RequestError(error::kUnexpected, "attach before " + route.doing);
      break;
    case Access::kAdmin:
      if (!conn.peer.admin)
        throw RequestError(
            error::kPermissionDenied,
            route.doing + " needs root or the admin group '" + ctx_.config()->admin_group + "'");
      break;
  }
}

void Service::handle(ConnectionState& conn, MessageType type, uint32_t rid, json body,
                     const Responder& respond, uint64_t decoded_bytes) {
  if (!body.is_object()) {
    ctx_.counters.frame(type);
    reply_failure(
        ctx_.counters, ctx_.log_limit,
        Request{type, rid, {}, respond, conn.peer, conn.version, nullptr},
        std::make_exception_ptr(RequestError(error::kBadPayload, "payload must be a map")));
    return;
  }
  dispatch(conn, type, rid, respond, decoded_bytes,
           [body = std::move(body)](Request& req) mutable { req.body = std::move(body); });
}

bool Service::decodes_where_it_runs(const ConnectionState& conn, MessageType type) const {
  const Route* route = handlers_.find(type);
  return conn.version != 0 && route && route->runs != Runs::kIoThread;
}

void Service::handle_payload(ConnectionState& conn, MessageType type, uint32_t rid,
                             std::vector<uint8_t> payload,
                             const placement::protocol::PayloadWeight& weight,
                             const Responder& respond) {
  // Shared, so that the handler (copied into the queues) carries the bytes without copying them.
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(payload));
  dispatch(conn, type, rid, respond, weight.decoded_bytes,
           [this, bytes, weight](Request& req) mutable {
             if (req.type == MessageType::kGraphUpload) refuse_graph_over_limits(req, *bytes);
             // Only the message's own keys: what its decoder would ignore is not built at all.
             const auto keys = placement::messages::keys_read(req.type);
             json body = placement::protocol::decode_payload(bytes->data(), bytes->size(), weight,
                                                             keys ? &*keys : nullptr);
             bytes.reset();
             if (!body.is_object()) throw RequestError(error::kBadPayload, "payload must be a map");
             req.body = std::move(body);
           });
}

void Service::refuse_graph_over_limits(const Request& req, const std::vector<uint8_t>& payload) {
  const auto counts = count_graph_upload(payload.data(), payload.size());
  if (!counts) return;  // not shaped like a graph: its decoding says what is wrong
  const auto cfg = ctx_.config();
  const auto over = graph_over_limits(*counts, payload.size(), cfg->limits,
                                      static_cast<int>(cfg->policy.max_groups));
  if (!over) return;
  ctx_.log_limit.log(
      spdlog::level::warn, req.peer.uid,
      fmt::format("uid {} pid {}: graph refused: {}", req.peer.uid, req.peer.pid, *over));
  throw RequestError(error::kOverLimit, *over);
}

template <class Fill>
void Service::dispatch(ConnectionState& conn, MessageType type, uint32_t rid,
                       const Responder& respond, uint64_t decoded_bytes, Fill fill) {
  ctx_.counters.frame(type);
  Request req{type, rid, json(), respond, conn.peer, conn.version, conn.job};
  try {
    if (conn.version == 0 && type != MessageType::kHello) {
      ctx_.counters.protocol_error();
      reply_error(respond, rid, error::kUnexpected,
                  "the first frame must be hello, got " + placement::protocol::to_string(type),
                  true);
      return;
    }
    const Route* route = handlers_.find(type);
    if (!route)
      throw RequestError(error::kUnexpected,
                         placement::protocol::to_string(type) + " is a reply, not a request");
    check_access(conn, *route);
    // Before the handshake there is no version yet to compare.
    if (route->access != Access::kHandshake && conn.version < route->min_version)
      throw RequestError(error::kUnexpected, placement::protocol::to_string(type) +
                                                 " needs protocol version " +
                                                 std::to_string(route->min_version));
    if (route->ends_attachment) conn.job.reset();
    switch (route->runs) {
      case Runs::kIoThread:
        fill(req);
        route->on_io(conn, req);
        req.body = json();
        trim_after_decode(decoded_bytes);
        return;
      case Runs::kJobStrand:
      case Runs::kPolicyThread: {
        // The job (if any) is taken before `req` moves into the handler.
        const std::shared_ptr<AttachedJob> job = req.job;
        const uid_t uid = conn.peer.uid;
        std::shared_ptr<InFlight> in_flight = conn.in_flight;
        in_flight->add(decoded_bytes);
        auto work = [this, route, req = std::move(req), fill = std::move(fill),
                     in_flight = std::move(in_flight), decoded_bytes, uid,
                     key = job.get()]() mutable {
          run_guarded(*route, req, fill);
          req.body = json();
          trim_after_decode(decoded_bytes);
          in_flight->done(decoded_bytes);
          ctx_.policy_share.done(uid, key);
        };
        // It waits its user's turn for a policy thread, then its job's strand (if any).
        ctx_.policy_share.submit(uid, job.get(), [this, job, work = std::move(work)]() mutable {
          if (job)
            boost::asio::post(job->strand, std::move(work));
          else
            boost::asio::post(ctx_.policy_pool, std::move(work));
        });
        return;
      }
    }
  } catch (...) {
    // `req` may have moved into a posted handler: answer from what the frame said.
    reply_failure(ctx_.counters, ctx_.log_limit,
                  Request{type, rid, {}, respond, conn.peer, conn.version, nullptr},
                  std::current_exception());
  }
}

template <class Fill>
void Service::run_guarded(const Route& route, Request& req, Fill& fill) {
  // Nothing may escape a policy thread's handler: it would end the daemon, and every job with it.
  const auto start = std::chrono::steady_clock::now();
  std::optional<JobLogScope> scope;
  if (req.job) scope.emplace(req.job->live.id(), req.job->live.name());
  try {
    fill(req);
    route.work(req);
  } catch (...) {
    reply_failure(ctx_.counters, ctx_.log_limit, req, std::current_exception());
  }
  ctx_.policy_latency.observe(
      req.type, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void Service::disconnected(ConnectionState& conn) {
  if (!conn.job) return;
  end_disconnected_job(ctx_, conn.job);
  conn.job.reset();
}

std::string Service::metrics_text() const { return render_metrics(ctx_); }

void Service::persist_all(std::function<void(size_t, size_t)> done) {
  persist_jobs(ctx_, std::move(done));
}

}  // namespace placementd
