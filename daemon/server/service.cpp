// The connection-level and inspection side of the service: the handshake, dispatch, status, jobs,
// plugins, reload (job_service.cpp has the job side).
#include "server/service.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "placement/serialization.h"
#include "live/request_error.h"
#include "server/version.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
namespace messages = placement::messages;
using nlohmann::json;

Service::Service(std::shared_ptr<const Config> config, PluginRegistry& registry, Store& store,
                 std::string socket_path)
    : config_(std::move(config)),
      registry_(registry),
      store_(store),
      socket_path_(std::move(socket_path)),
      policy_pool_(static_cast<size_t>(config_->policy_threads)) {}

Service::~Service() { policy_pool_.join(); }

std::shared_ptr<const Config> Service::config() const {
  std::lock_guard<std::mutex> lock(config_mutex_);
  return config_;
}

void Service::set_config(std::shared_ptr<const Config> config) {
  std::lock_guard<std::mutex> lock(config_mutex_);
  config_ = std::move(config);
}

size_t Service::session_count() const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  return sessions_.size();
}

void Service::handle(ConnectionState& conn, MessageType type, uint32_t rid, const json& body,
                     const Responder& respond) {
  ++frames_received;
  try {
    if (!body.is_object()) throw RequestError(error::kBadPayload, "payload must be a map");
    if (conn.version == 0 && type != MessageType::kHello) {
      ++protocol_errors;
      reply_error(respond, rid, error::kUnexpected,
                  "the first frame must be hello, got " + placement::protocol::to_string(type), true);
      return;
    }
    switch (type) {
      case MessageType::kHello: return hello(conn, rid, body, respond);
      case MessageType::kAttach: return attach(conn, rid, body, respond);
      case MessageType::kGraphUpload: return upload_graph(conn, rid, body, respond);
      case MessageType::kPlacementRequest: return request_placement(conn, rid, respond);
      case MessageType::kStepReport: return step_report(conn, rid, body, respond);
      case MessageType::kProfileReport: return profile_report(conn, rid, body, respond);
      case MessageType::kDetach: return detach(conn, rid, respond);
      case MessageType::kStatus: return status(conn, rid, respond);
      case MessageType::kListJobs: return list_jobs(conn, rid, body, respond);
      case MessageType::kJobShow: return show_job(conn, rid, body, respond);
      case MessageType::kListPlugins: return list_plugins(rid, respond);
      case MessageType::kReload: return reload(conn, rid, respond);
      default:
        throw RequestError(error::kUnexpected, placement::protocol::to_string(type) + " is a reply, not a request");
    }
  } catch (const RequestError& e) {
    ++protocol_errors;
    reply_error(respond, rid, e.code, e.what());
  } catch (const placement::FormatError& e) {
    ++protocol_errors;
    reply_error(respond, rid, error::kBadPayload, e.what());
  } catch (const std::exception& e) {
    ++protocol_errors;
    spdlog::error("uid {} pid {}: {} failed: {}", conn.peer.uid, conn.peer.pid, placement::protocol::to_string(type), e.what());
    reply_error(respond, rid, error::kInternal, e.what());
  }
}

void Service::hello(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (conn.version != 0) throw RequestError(error::kUnexpected, "hello was already received");
  messages::Hello hello;
  try {
    hello = messages::Hello::from_json(body);
  } catch (const placement::FormatError& e) {
    // Without a version there is no protocol to answer in: the connection ends.
    reply_error(respond, rid, error::kBadPayload, std::string("hello: ") + e.what(), true);
    return;
  }
  const uint64_t lo = hello.min_version, hi = hello.max_version;
  const uint64_t chosen = std::min<uint64_t>(hi, placement::protocol::kMaxVersion);
  if (lo > hi || chosen < lo || chosen < placement::protocol::kMinVersion) {
    reply_error(respond, rid, error::kUnsupportedVersion,
                "client speaks protocol versions " + std::to_string(lo) + ".." + std::to_string(hi) +
                    ", this placementd speaks " + std::to_string(placement::protocol::kMinVersion) + ".." +
                    std::to_string(placement::protocol::kMaxVersion),
                true);
    return;
  }
  conn.version = static_cast<uint16_t>(chosen);
  const messages::Welcome welcome{conn.version, std::string("placementd ") + kVersion, config()->max_frame_bytes,
                                  conn.peer.uid, conn.peer.admin};
  respond(welcome.kType, rid, welcome.to_json(), false);
}

std::vector<std::shared_ptr<AttachedJob>> Service::visible_sessions(const Peer& peer, bool finished) const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  std::vector<std::shared_ptr<AttachedJob>> out;
  for (const auto& [id, job] : sessions_)
    if (peer.admin || job->live.uid() == peer.uid) out.push_back(job);
  if (finished)
    for (const auto& job : finished_)
      if (peer.admin || job->live.uid() == peer.uid) out.push_back(job);
  return out;
}

void Service::status(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  const auto cfg = config();
  const json plugins = {{"grouper", registry_.count(placement::PluginKind::kGrouper)},
                        {"placer", registry_.count(placement::PluginKind::kPlacer)},
                        {"algorithm", registry_.count(placement::PluginKind::kAlgorithm)}};
  respond(MessageType::kStatusReply, rid,
          {{"version", kVersion},
           {"pid", ::getpid()},
           {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
           {"config", cfg->path},
           {"socket", socket_path_},
           {"state_dir", store_.dir()},
           {"store_failed_writes", store_.failed_writes()},
           {"jobs_visible", visible_sessions(conn.peer).size()},
           {"jobs_total", conn.peer.admin ? json(session_count()) : json(nullptr)},
           {"connections", connections_open.load()},
           {"connections_total", connections_total.load()},
           {"frames_received", frames_received.load()},
           {"reports_received", reports_received.load()},
           {"protocol_errors", protocol_errors.load()},
           {"plugins", plugins},
           {"plugins_skipped", registry_.skipped_count()},
           {"policy", {{"grouper", cfg->policy.grouper}, {"placer", cfg->policy.placer}, {"algorithm", cfg->policy.algorithm}}},
           {"peer", {{"uid", conn.peer.uid}, {"admin", conn.peer.admin}}}},
          false);
}

void Service::inspect(const ConnectionState& conn, uint32_t rid, const Responder& respond, std::function<void()> work) {
  // Nothing may escape a policy thread's handler (it would end the daemon): a failure is the
  // request's error.
  auto guarded = [this, rid, respond, work = std::move(work)] {
    try {
      work();
    } catch (const std::exception& e) {
      ++protocol_errors;
      spdlog::error("inspection failed: {}", e.what());
      reply_error(respond, rid, error::kInternal, e.what());
    }
  };
  // An attached job's own connection sees its earlier reports counted: its session's strand runs
  // them first.
  if (conn.job) boost::asio::post(conn.job->strand, std::move(guarded));
  else boost::asio::post(policy_pool_, std::move(guarded));
}

void Service::list_jobs(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  const messages::ListJobs request = messages::ListJobs::from_json(body);
  const bool all = request.all, finished = request.finished;
  if (all && !conn.peer.admin)
    throw RequestError(error::kPermissionDenied, "listing every user's jobs needs root or the admin group '" + config()->admin_group + "'");
  // A session's lock may be held by its policy work for seconds: wait for it on a policy thread,
  // not on the I/O thread.
  inspect(conn, rid, respond, [this, peer = conn.peer, all, finished, rid, respond] {
    json jobs = json::array();
    for (const auto& job : visible_sessions(peer, finished)) {
      if (!all && job->live.uid() != peer.uid && !peer.admin) continue;
      jobs.push_back(job->live.summary());
    }
    respond(MessageType::kJobList, rid, {{"jobs", jobs}}, false);
  });
}

void Service::show_job(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  const uint64_t id = messages::JobShow::from_json(body).id;
  inspect(conn, rid, respond, [this, peer = conn.peer, id, rid, respond] {
    for (const auto& job : visible_sessions(peer, true)) {
      if (job->live.id() != id) continue;
      respond(MessageType::kJobInfo, rid, job->live.detail(), false);
      return;
    }
    // Another user's job is reported exactly like a missing one: uids see only their own jobs.
    ++protocol_errors;
    reply_error(respond, rid, error::kNotFound,
                "no job " + std::to_string(id) + " visible to uid " + std::to_string(peer.uid));
  });
}

void Service::list_plugins(uint32_t rid, const Responder& respond) {
  json plugins = json::array();
  for (const auto& p : registry_.plugins()) {
    json params = json::array();
    for (const auto& h : p.info.hyperparameters) {
      json j = {{"name", h.name}, {"type", placement::param_type_name(h.default_value)},
                {"default", placement::format_param(h.default_value)}, {"summary", h.summary}};
      if (h.min) j["min"] = *h.min;
      if (h.max) j["max"] = *h.max;
      if (!h.choices.empty()) j["choices"] = h.choices;
      params.push_back(j);
    }
    plugins.push_back({{"name", p.info.name}, {"kind", to_string(p.info.kind)}, {"version", p.info.version},
                       {"summary", p.info.summary}, {"file", p.file}, {"torch_version", p.info.torch_version},
                       {"hyperparameters", params}});
  }
  json skipped = json::array();
  for (const auto& s : registry_.skipped()) skipped.push_back({{"file", s.file}, {"reason", s.reason}});
  respond(MessageType::kPluginList, rid, {{"plugins", plugins}, {"skipped", skipped}}, false);
}

void Service::reload(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.peer.admin)
    throw RequestError(error::kPermissionDenied, "reloading the config needs root or the admin group '" + config()->admin_group + "'");
  if (!reload_) throw RequestError(error::kInternal, "reload is not available");
  const std::vector<std::string> errors = reload_();
  if (!errors.empty()) {
    std::string text = "config not reloaded, the old one stays in force:";
    for (const auto& e : errors) text += "\n" + e;
    reply_error(respond, rid, error::kInvalidConfig, text);
    return;
  }
  const messages::Reloaded reloaded{config()->path, registry_.plugins().size()};
  respond(reloaded.kType, rid, reloaded.to_json(), false);
}

}  // namespace placementd
