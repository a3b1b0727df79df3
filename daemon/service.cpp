#include "service.h"

#include <fnmatch.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "exploration.h"
#include "live_profiles.h"
#include "placement/serialization.h"
#include "version.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
using nlohmann::json;

namespace {

// The live simulator warm start runs on the session's policy strand while the job trains on its
// start placement, and is done before the policy's first sample; its search takes a second at
// most (~10,000 placements of a 5,000-op graph, the full 20,000 of anything smaller than ~2,500 ops).
constexpr double kLiveSearchSeconds = 1.0;

// A request that is well framed but wrong in content; answered with an error frame, the
// connection stays open.
struct RequestError : std::runtime_error {
  RequestError(const char* code, const std::string& message) : std::runtime_error(message), code(code) {}
  const char* code;
};

std::string required_string(const json& body, const char* key, size_t max_size) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string())
    throw RequestError(error::kBadPayload, std::string("'") + key + "' must be a string");
  const std::string value = it->get<std::string>();
  if (value.empty() || value.size() > max_size)
    throw RequestError(error::kBadPayload, std::string("'") + key + "' must have 1 to " + std::to_string(max_size) + " characters");
  return value;
}

bool device_allowed(const Config& config, const std::string& name) {
  for (const std::string& glob : config.allow)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

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
      respond(MessageType::kError, rid,
              placement::protocol::error_body(error::kUnexpected, "the first frame must be hello, got " + placement::protocol::to_string(type), true),
              true);
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
    respond(MessageType::kError, rid, placement::protocol::error_body(e.code, e.what(), false), false);
  } catch (const placement::FormatError& e) {
    ++protocol_errors;
    respond(MessageType::kError, rid, placement::protocol::error_body(error::kBadPayload, e.what(), false), false);
  } catch (const std::exception& e) {
    ++protocol_errors;
    spdlog::error("uid {} pid {}: {} failed: {}", conn.peer.uid, conn.peer.pid, placement::protocol::to_string(type), e.what());
    respond(MessageType::kError, rid, placement::protocol::error_body(error::kInternal, e.what(), false), false);
  }
}

void Service::hello(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (conn.version != 0) throw RequestError(error::kUnexpected, "hello was already received");
  auto min_it = body.find("min_version");
  auto max_it = body.find("max_version");
  if (min_it == body.end() || max_it == body.end() || !min_it->is_number_unsigned() || !max_it->is_number_unsigned()) {
    respond(MessageType::kError, rid, placement::protocol::error_body(error::kBadPayload, "hello needs min_version and max_version", true), true);
    return;
  }
  const uint64_t lo = min_it->get<uint64_t>(), hi = max_it->get<uint64_t>();
  const uint64_t chosen = std::min<uint64_t>(hi, placement::protocol::kMaxVersion);
  if (lo > hi || chosen < lo || chosen < placement::protocol::kMinVersion) {
    respond(MessageType::kError, rid,
            placement::protocol::error_body(error::kUnsupportedVersion,
                                            "client speaks protocol versions " + std::to_string(lo) + ".." + std::to_string(hi) +
                                                ", this placementd speaks " + std::to_string(placement::protocol::kMinVersion) +
                                                ".." + std::to_string(placement::protocol::kMaxVersion),
                                            true),
            true);
    return;
  }
  conn.version = static_cast<uint16_t>(chosen);
  respond(MessageType::kWelcome, rid,
          {{"version", conn.version},
           {"server", std::string("placementd ") + kVersion},
           {"max_frame_bytes", config()->max_frame_bytes},
           {"uid", conn.peer.uid},
           {"admin", conn.peer.admin}},
          false);
}

void Service::attach(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (conn.session) throw RequestError(error::kUnexpected, "this connection is already attached as job " + std::to_string(conn.session->id));
  const auto cfg = config();
  auto session = std::make_shared<Session>();
  session->job = required_string(body, "job", 256);
  session->uid = conn.peer.uid;
  session->pid = conn.peer.pid;
  session->sdk_version = body.value("sdk_version", "");
  session->torch_version = body.value("torch_version", "");
  if (auto it = body.find("expected_steps"); it != body.end()) {
    if (!it->is_number_unsigned()) throw RequestError(error::kBadPayload, "'expected_steps' must be a non-negative integer");
    session->expected_steps = it->get<uint64_t>();
  }
  session->protocol_version = conn.version;
  if (auto it = body.find("profile_steps"); it != body.end()) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > 1000)
      throw RequestError(error::kBadPayload, "'profile_steps' must be an integer from 0 to 1000");
    session->job_profile_steps = it->get<int64_t>();
  }
  if (!body.contains("devices")) throw RequestError(error::kBadPayload, "'devices' is missing");
  try {
    session->devices = placement::devices_from_json(body.at("devices"));
  } catch (const placement::FormatError& e) {
    throw RequestError(error::kBadPayload, std::string("devices: ") + e.what());
  }
  for (const auto& d : session->devices.devices)
    if (!device_allowed(*cfg, d.name()))
      throw RequestError(error::kPermissionDenied, "device " + d.name() + " is not in this node's device pool ([devices].allow)");
  session->policy = effective_policy(*cfg, session->job, session->uid);
  session->attached_at = std::chrono::system_clock::now();
  session->attached_steady = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    session->id = next_session_id_++;
    session->rng.seed(session->id);
    session->strand.emplace(policy_pool_.get_executor());
    sessions_[session->id] = session;
  }
  conn.session = session;
  spdlog::info("job {} '{}' attached (uid {}, pid {}, {} devices; {} / {} / {})", session->id, session->job,
               session->uid, session->pid, session->devices.size(), session->policy.grouper,
               session->policy.placer, session->policy.algorithm);
  const auto& e = session->policy.exploration;
  respond(MessageType::kAttached, rid,
          {{"session", session->id},
           {"grouper", session->policy.grouper},
           {"placer", session->policy.placer},
           {"algorithm", session->policy.algorithm},
           {"steps_per_candidate", e.steps_per_candidate},
           {"warmup_steps", e.warmup_steps},
           {"max_candidates", e.max_candidates}},
          false);
}

void Service::upload_graph(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "attach before uploading a graph");
  if (!body.contains("graph")) throw RequestError(error::kBadPayload, "'graph' is missing");
  placement::OpGraph graph;
  try {
    graph = placement::graph_from_json(body.at("graph"));
  } catch (const placement::FormatError& e) {
    throw RequestError(error::kBadPayload, std::string("graph: ") + e.what());
  }
  auto session = conn.session;
  std::optional<placement::Placement> start;
  if (auto it = body.find("placement"); it != body.end()) {
    try {
      start = placement::placement_from_json(*it, graph, session->devices);
    } catch (const std::exception& e) {
      throw RequestError(error::kBadPayload, std::string("placement: ") + e.what());
    }
  }
  const double headroom = config()->memory_headroom_fraction;
  // Building the policy objects and grouping can take a while on big graphs: off the I/O thread.
  boost::asio::post(*session->strand, [this, session, graph = std::move(graph), start, headroom, rid, respond]() mutable {
    std::lock_guard<std::mutex> lock(session->mutex);
    bool taken = false;  // the session holds this upload's graph: undo on failure
    auto undo = [&] {
      if (!taken) return;
      session->pipeline.reset();
      session->graph.reset();
    };
    try {
      if (session->graph) throw RequestError(error::kUnexpected, "the graph was already uploaded");
      for (const auto& op : graph.ops)
        if (op.pinned && std::none_of(session->devices.devices.begin(), session->devices.devices.end(),
                                      [&](const placement::Device& d) { return d.kind == *op.pinned; }))
          throw RequestError(error::kBadPayload, "op " + std::to_string(op.id) + " '" + op.name + "' is pinned to " +
                                                     to_string(*op.pinned) + " but the job has no such device");
      session->grouper = registry_.create_grouper(session->policy.grouper, session->policy.grouper_params);
      session->placer = registry_.create_placer(session->policy.placer, session->policy.placer_params);
      session->algorithm = registry_.create_algorithm(session->policy.algorithm, session->policy.algorithm_params);
      session->graph = std::move(graph);
      taken = true;
      const placement::OpGraph& g = *session->graph;
      session->pipeline =
          std::make_unique<PolicyPipeline>(*session->grouper, *session->placer, g, session->devices, session->rng);
      const placement::Grouping& grouping = session->pipeline->grouping();
      placement::TrainablePolicy* policy = session->pipeline->policy();
      session->algorithm->reset({policy, session->policy.exploration.failing_reward});
      session->fingerprint = g.fingerprint();
      if (auto stored = store_.best(g, session->devices)) session->cached = stored->placement;
      bool resumed = false;
      if (policy)
        if (auto state = store_.policy_state(g, session->devices, policy_key(*session))) {
          try {
            policy->load_state(*state);
            resumed = true;
          } catch (const std::exception& e) {
            spdlog::warn("job {} '{}': stored policy state not used: {}", session->id, session->job, e.what());
          }
        }
      sim::SimulatorOptions memory_options;
      memory_options.memory_headroom_fraction = headroom;
      session->memory_model.emplace(g, session->devices, memory_options);
      // A fresh policy first imitates the configured baseline, so its first live candidates are a
      // heuristic's rather than uniform noise; a resumed one has learned more than that already.
      // It runs once the job trains (warm_start()), so the first directive does not wait for it.
      session->policy_resumed = resumed;
      session->warm_start_pending = !resumed && !session->policy.warm_start.empty();
      session->job_start = std::move(start);
      spdlog::info("job {} '{}': graph {} with {} ops in {} groups{}{}{}", session->id, session->job, session->fingerprint,
                   session->graph->ops.size(), grouping.num_groups,
                   session->pipeline->learned_grouping() ? " (learned grouping, regrouped every sample)" : "",
                   session->cached ? ", stored best placement found" : "", resumed ? ", policy state resumed" : "");
      respond(MessageType::kGraphAccepted, rid,
              {{"fingerprint", session->fingerprint},
               {"ops", session->graph->ops.size()},
               {"edges", session->graph->edges.size()},
               {"groups", grouping.num_groups},
               {"cached", session->cached.has_value()},
               {"policy_resumed", resumed}},
              false);
    } catch (const RequestError& e) {
      undo();
      respond(MessageType::kError, rid, placement::protocol::error_body(e.code, e.what(), false), false);
    } catch (const std::exception& e) {
      undo();
      spdlog::warn("job {} '{}': graph rejected: {}", session->id, session->job, e.what());
      respond(MessageType::kError, rid, placement::protocol::error_body(error::kBadPayload, e.what(), false), false);
    }
  });
}

void Service::request_placement(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "attach before requesting a placement");
  auto session = conn.session;
  boost::asio::post(*session->strand, [this, session, rid, respond] {
    std::lock_guard<std::mutex> lock(session->mutex);
    try {
      if (!session->graph) throw RequestError(error::kUnexpected, "upload the graph before requesting a placement");
      // The first request starts the session; a later one gets the placement in force again.
      Directive d;
      const bool first = session->candidates.empty();
      if (first) {
        d = start_session(*session);
      } else {
        const CandidateRecord& c = session->candidates.at(session->current_candidate);
        d = {c.id, c.reason, c.placement};
      }
      respond(MessageType::kPlacementDirective, rid, directive_body(*session, d), false);
      // The job trains from here on; the warm start runs now unless it waits for the job's
      // profiles (the start or the all-on-one-device candidate after it asks for them).
      if (first && session->warm_start_pending) {
        const bool profiles_coming = can_profile(*session) && !fully_profiled(*session);
        boost::asio::post(*session->strand, [this, session, profiles_coming] {
          warm_start(session, profiles_coming ? WarmStartWhen::kProfiled : WarmStartWhen::kNow);
        });
      }
    } catch (const RequestError& e) {
      respond(MessageType::kError, rid, placement::protocol::error_body(e.code, e.what(), false), false);
    } catch (const std::exception& e) {
      spdlog::warn("job {} '{}': no placement: {}", session->id, session->job, e.what());
      respond(MessageType::kError, rid, placement::protocol::error_body(error::kInternal, e.what(), false), false);
    }
  });
}

void Service::step_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  ++reports_received;
  if (!conn.session) throw RequestError(error::kUnexpected, "step report from a connection that is not attached");
  const placement::Measurement m = placement::measurement_from_json(body);
  auto session = conn.session;
  (void)rid;
  // On the session's strand, never on the I/O thread: training the policy may hold the session
  // for seconds, and the I/O thread must not wait for that (every connection would stall, and
  // half-received frames of other jobs would time out). The job does not wait either: the next
  // directive is pushed unsolicited (request id 0).
  boost::asio::post(*session->strand, [this, session, m, respond] {
    {
      std::lock_guard<std::mutex> lock(session->mutex);
      if (session->state == SessionState::kDetached) return;
      // One-way: a report for a placement we never sent is counted, not answered.
      if (!record_report(*session, m)) return;
    }
    warm_start(session, WarmStartWhen::kBeforeFirstSample);
    std::lock_guard<std::mutex> lock(session->mutex);
    if (session->state == SessionState::kDetached) return;
    try {
      if (auto d = advance_session(*session, store_))
        respond(MessageType::kPlacementDirective, 0, directive_body(*session, *d), false);
    } catch (const std::exception& e) {
      spdlog::error("job {} '{}': policy step failed, the job keeps its placement: {}", session->id, session->job, e.what());
    }
  });
}

void Service::profile_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "profile report from a connection that is not attached");
  if (conn.version < placement::protocol::kProfileReportVersion)
    throw RequestError(error::kUnexpected, "profile_report needs protocol version " +
                                               std::to_string(placement::protocol::kProfileReportVersion));
  placement::ProfileReport report = placement::profile_report_from_json(body);
  auto session = conn.session;
  boost::asio::post(*session->strand, [this, session, report = std::move(report), rid, respond] {
    {
      std::lock_guard<std::mutex> lock(session->mutex);
      if (session->state == SessionState::kDetached) return;
      try {
        apply_profiles(*session, report);
      } catch (const std::exception& e) {
        ++protocol_errors;
        spdlog::warn("job {} '{}': profile report not used: {}", session->id, session->job, e.what());
        respond(MessageType::kError, rid, placement::protocol::error_body(error::kBadPayload, e.what(), false), false);
        return;
      }
      std::set<std::string> kinds;
      for (const auto& entry : report.ops) kinds.insert(entry.kind);
      std::string names;
      for (const auto& k : kinds) names += (names.empty() ? "" : ", ") + k;
      spdlog::info("job {} '{}': profiles of {} ops ({}) measured over {} steps under placement {}", session->id,
                   session->job, report.ops.size(), names, report.steps, report.placement_id);
    }
    warm_start(session, WarmStartWhen::kProfiled);
  });
}

void Service::warm_start(const std::shared_ptr<Session>& session, WarmStartWhen when) {
  // Under the session's lock like all policy work (detach persists the policy's state from the I/O
  // thread), so a report arriving meanwhile waits for it; this happens once per session.
  std::lock_guard<std::mutex> lock(session->mutex);
  if (!session->warm_start_pending || session->state == SessionState::kDetached) return;
  // Before the first sample it runs on what there is: profiles of some device kind never came
  // (its candidate failed, or the job does not profile).
  const bool ready = when == WarmStartWhen::kNow || fully_profiled(*session) ||
                     (when == WarmStartWhen::kBeforeFirstSample && session->single_device_tried);
  if (!ready) return;
  session->warm_start_pending = false;
  offline::ImitationOptions imitation;
  imitation.baseline = session->policy.warm_start;
  imitation.search.max_seconds = kLiveSearchSeconds;
  session->warm_start = offline::imitate_baseline(session->pipeline->policy(), *session->memory_model, registry_,
                                                  session->pipeline->grouping(), imitation, session->rng(),
                                                  session->pipeline->action_for({}));
  if (session->warm_start->skipped.empty())
    spdlog::info("job {} '{}': policy warm-started from {} in {} steps (per-group probability {:.2f} -> {:.2f})",
                 session->id, session->job, imitation.baseline, session->warm_start->steps,
                 session->warm_start->probability_before, session->warm_start->probability_after);
  else
    spdlog::warn("job {} '{}': no warm start: {}", session->id, session->job, session->warm_start->skipped);
}

void Service::detach(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "this connection is not attached");
  auto session = conn.session;
  conn.session.reset();
  // After the reports sent before it, and after any policy work in progress (its state is persisted).
  boost::asio::post(*session->strand, [this, session, rid, respond] {
    bool persisted;
    json best = nullptr;
    {
      std::lock_guard<std::mutex> lock(session->mutex);
      persisted = persist_session(*session, store_);
      if (const CandidateRecord* b = session->best()) {
        best = *b->median(session->policy.exploration.warmup_steps);
        // Written now or after an earlier candidate: what counts is that the store holds it.
        if (auto stored = store_.best(*session->graph, session->devices))
          persisted = persisted || stored->step_time_s <= best.get<double>();
      }
    }
    finish(session);
    spdlog::info("job {} '{}' detached", session->id, session->job);
    respond(MessageType::kDetached, rid, {{"best_step_time_s", best}, {"persisted", persisted}}, false);
  });
}

void Service::disconnected(ConnectionState& conn) {
  if (!conn.session) return;
  auto session = conn.session;
  conn.session.reset();
  boost::asio::post(*session->strand, [this, session] {
    {
      std::lock_guard<std::mutex> lock(session->mutex);
      persist_session(*session, store_);
    }
    finish(session);
    spdlog::info("job {} '{}' disconnected without detach; session closed", session->id, session->job);
  });
}

void Service::finish(const std::shared_ptr<Session>& session) {
  {
    std::lock_guard<std::mutex> lock(session->mutex);
    session->state = SessionState::kDetached;
    session->detached_steady = std::chrono::steady_clock::now();
  }
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  sessions_.erase(session->id);
  finished_.push_back(session);
  if (finished_.size() > kFinishedKept) finished_.pop_front();
}

size_t Service::persist_all() {
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  size_t written = 0;
  for (auto& s : all) {
    std::lock_guard<std::mutex> lock(s->mutex);
    written += persist_session(*s, store_) ? 1 : 0;
  }
  return written;
}

std::vector<std::shared_ptr<Session>> Service::visible_sessions(const Peer& peer, bool finished) const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  std::vector<std::shared_ptr<Session>> out;
  for (const auto& [id, s] : sessions_)
    if (peer.admin || s->uid == peer.uid) out.push_back(s);
  if (finished)
    for (const auto& s : finished_)
      if (peer.admin || s->uid == peer.uid) out.push_back(s);
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

void Service::inspect(const ConnectionState& conn, std::function<void()> work) {
  // An attached job's own connection sees its earlier reports counted: its session's strand runs
  // them first.
  if (conn.session) boost::asio::post(*conn.session->strand, std::move(work));
  else boost::asio::post(policy_pool_, std::move(work));
}

void Service::list_jobs(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  const bool all = body.value("all", false);
  const bool finished = body.value("finished", false);
  if (all && !conn.peer.admin)
    throw RequestError(error::kPermissionDenied, "listing every user's jobs needs root or the admin group '" + config()->admin_group + "'");
  // A session's lock may be held by its policy work for seconds: wait for it on a policy thread,
  // not on the I/O thread.
  inspect(conn, [this, peer = conn.peer, all, finished, rid, respond] {
    json jobs = json::array();
    for (const auto& s : visible_sessions(peer, finished)) {
      if (!all && s->uid != peer.uid && !peer.admin) continue;
      std::lock_guard<std::mutex> lock(s->mutex);
      jobs.push_back(s->summary());
    }
    respond(MessageType::kJobList, rid, {{"jobs", jobs}}, false);
  });
}

void Service::show_job(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  auto it = body.find("id");
  if (it == body.end() || !it->is_number_unsigned()) throw RequestError(error::kBadPayload, "'id' must be a job id");
  const uint64_t id = it->get<uint64_t>();
  inspect(conn, [this, peer = conn.peer, id, rid, respond] {
    for (const auto& s : visible_sessions(peer, true)) {
      if (s->id != id) continue;
      std::lock_guard<std::mutex> lock(s->mutex);
      respond(MessageType::kJobInfo, rid, s->detail(), false);
      return;
    }
    // Another user's job is reported exactly like a missing one: uids see only their own jobs.
    ++protocol_errors;
    respond(MessageType::kError, rid,
            placement::protocol::error_body(error::kNotFound, "no job " + std::to_string(id) + " visible to uid " +
                                                                  std::to_string(peer.uid), false),
            false);
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
    respond(MessageType::kError, rid, placement::protocol::error_body(error::kInvalidConfig, text, false), false);
    return;
  }
  respond(MessageType::kReloaded, rid, {{"config", config()->path}, {"plugins", registry_.plugins().size()}}, false);
}

}  // namespace placementd
