// The job side of the service: attach, graph upload, placements, step and profile reports,
// the warm start, detach, persisting. A job's messages are handled on its session's strand.
#include "server/service.h"

#include <fnmatch.h>

#include <algorithm>
#include <set>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "live/exploration.h"
#include "live/live_profiles.h"
#include "placement/serialization.h"
#include "server/request_error.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
using nlohmann::json;

namespace messages = placement::messages;

namespace {

bool device_allowed(const Config& config, const std::string& name) {
  for (const std::string& glob : config.allow)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

void Service::attach(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (conn.session) throw RequestError(error::kUnexpected, "this connection is already attached as job " + std::to_string(conn.session->id));
  const auto cfg = config();
  messages::Attach attach = messages::Attach::from_json(body);
  auto session = std::make_shared<Session>();
  session->job = std::move(attach.job);
  session->uid = conn.peer.uid;
  session->pid = conn.peer.pid;
  session->sdk_version = std::move(attach.sdk_version);
  session->torch_version = std::move(attach.torch_version);
  session->expected_steps = attach.expected_steps;
  session->protocol_version = conn.version;
  session->job_profile_steps = attach.profile_steps.value_or(0);
  session->devices = std::move(attach.devices);
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
  const messages::Attached attached{session->id,          session->policy.grouper, session->policy.placer,
                                    session->policy.algorithm, e.steps_per_candidate, e.warmup_steps,
                                    e.max_candidates};
  respond(attached.kType, rid, attached.to_json(), false);
}

void Service::upload_graph(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "attach before uploading a graph");
  auto session = conn.session;
  // The session's devices are set at attach and never change: readable off its strand.
  messages::GraphUpload upload = messages::GraphUpload::from_json(body, session->devices);
  placement::OpGraph graph = std::move(upload.graph);
  std::optional<placement::Placement> start = std::move(upload.start);
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
      session->warm_start_pending = !resumed && !session->policy.warm_start.empty();
      session->job_start = std::move(start);
      spdlog::info("job {} '{}': graph {} with {} ops in {} groups{}{}{}", session->id, session->job, session->fingerprint,
                   session->graph->ops.size(), grouping.num_groups,
                   session->pipeline->learned_grouping() ? " (learned grouping, regrouped every sample)" : "",
                   session->cached ? ", stored best placement found" : "", resumed ? ", policy state resumed" : "");
      const messages::GraphAccepted accepted{session->fingerprint,     session->graph->ops.size(),
                                             session->graph->edges.size(), grouping.num_groups,
                                             session->cached.has_value(), resumed};
      respond(accepted.kType, rid, accepted.to_json(), false);
    } catch (const RequestError& e) {
      undo();
      respond(MessageType::kError, rid, messages::Error{e.code, e.what(), false}.to_json(), false);
    } catch (const std::exception& e) {
      undo();
      spdlog::warn("job {} '{}': graph rejected: {}", session->id, session->job, e.what());
      respond(MessageType::kError, rid, messages::Error{error::kBadPayload, e.what(), false}.to_json(), false);
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
        d.placement_id = c.id;
        d.reason = c.reason;
        d.placement = c.placement;
      }
      respond(MessageType::kPlacementDirective, rid, directive_body(*session, d), false);
      // The job trains from here on; the warm start runs now unless it waits for the job's
      // profiles (the start or the all-on-one-device candidate after it asks for them).
      if (first && session->warm_start_pending) {
        const bool profiles_coming = can_profile(*session) && !fully_profiled(*session);
        boost::asio::post(*session->strand, [this, session, profiles_coming] {
          std::lock_guard<std::mutex> lock(session->mutex);
          warm_start(*session, profiles_coming ? WarmStartWhen::kProfiled : WarmStartWhen::kNow);
        });
      }
    } catch (const RequestError& e) {
      respond(MessageType::kError, rid, messages::Error{e.code, e.what(), false}.to_json(), false);
    } catch (const std::exception& e) {
      spdlog::warn("job {} '{}': no placement: {}", session->id, session->job, e.what());
      respond(MessageType::kError, rid, messages::Error{error::kInternal, e.what(), false}.to_json(), false);
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
    std::lock_guard<std::mutex> lock(session->mutex);
    if (session->state == SessionState::kDetached) return;
    // One-way: a report for a placement we never sent is counted, not answered.
    if (!record_report(*session, m)) return;
    try {
      warm_start(*session, WarmStartWhen::kBeforeFirstSample);
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
    std::lock_guard<std::mutex> lock(session->mutex);
    if (session->state == SessionState::kDetached) return;
    try {
      apply_profiles(*session, report);
    } catch (const std::exception& e) {
      ++protocol_errors;
      spdlog::warn("job {} '{}': profile report not used: {}", session->id, session->job, e.what());
      respond(MessageType::kError, rid, messages::Error{error::kBadPayload, e.what(), false}.to_json(), false);
      return;
    }
    std::set<std::string> kinds;
    for (const auto& entry : report.ops) kinds.insert(entry.kind);
    std::string names;
    for (const auto& k : kinds) names += (names.empty() ? "" : ", ") + k;
    spdlog::info("job {} '{}': profiles of {} ops ({}) measured over {} steps under placement {}", session->id,
                 session->job, report.ops.size(), names, report.steps, report.placement_id);
    warm_start(*session, WarmStartWhen::kProfiled);
  });
}

void Service::warm_start(Session& session, WarmStartWhen when) {
  if (!session.warm_start_pending || session.state == SessionState::kDetached) return;
  // Before the first sample it runs on what there is: profiles of some device kind never came
  // (its candidate failed, or the job does not profile).
  const bool ready = when == WarmStartWhen::kNow || fully_profiled(session) ||
                     (when == WarmStartWhen::kBeforeFirstSample && session.single_device_tried);
  if (!ready) return;
  session.warm_start_pending = false;
  offline::ImitationOptions imitation;
  imitation.baseline = session.policy.warm_start;
  // The search runs on the session's policy strand while the job trains on its start placement
  // and holds up only this job's next candidate; [policy] warm_start_seconds bounds it.
  imitation.search.max_seconds = session.policy.warm_start_seconds;
  session.warm_start = offline::imitate_baseline(session.pipeline->policy(), *session.memory_model, registry_,
                                                 session.pipeline->grouping(), imitation, session.rng(),
                                                 session.pipeline->action_for({}));
  if (session.warm_start->skipped.empty())
    spdlog::info("job {} '{}': policy warm-started from {} in {} steps (per-group probability {:.2f} -> {:.2f})",
                 session.id, session.job, imitation.baseline, session.warm_start->steps,
                 session.warm_start->probability_before, session.warm_start->probability_after);
  else
    spdlog::warn("job {} '{}': no warm start: {}", session.id, session.job, session.warm_start->skipped);
}

void Service::detach(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.session) throw RequestError(error::kUnexpected, "this connection is not attached");
  auto session = conn.session;
  conn.session.reset();
  // After the reports sent before it, and after any policy work in progress (its state is persisted).
  boost::asio::post(*session->strand, [this, session, rid, respond] {
    messages::Detached detached;
    {
      std::lock_guard<std::mutex> lock(session->mutex);
      detached.persisted = persist_session(*session, store_);
      if (const CandidateRecord* b = session->best()) {
        detached.best_step_time_s = *b->median(session->policy.exploration.warmup_steps);
        // Written now or after an earlier candidate: what counts is that the store holds it.
        if (auto stored = store_.best(*session->graph, session->devices))
          detached.persisted = detached.persisted || stored->step_time_s <= *detached.best_step_time_s;
      }
    }
    finish(session);
    spdlog::info("job {} '{}' detached", session->id, session->job);
    respond(detached.kType, rid, detached.to_json(), false);
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

}  // namespace placementd
