// The job side of the service: attach, graph upload, placements, step and profile reports,
// detach. Each message is decoded here and handed to the job's LiveSession on its strand; what the
// session returns is sent back.
#include "server/service.h"

#include <fnmatch.h>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "live/request_error.h"
#include "placement/serialization.h"

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

// Runs `work` on the job's strand. What escapes it is logged: an exception out of a policy thread's
// handler would end the daemon, and with it every job.
template <class Work>
void on_strand(const std::shared_ptr<AttachedJob>& job, const char* what, Work work) {
  boost::asio::post(job->strand, [job, what, work = std::move(work)]() mutable {
    try {
      work();
    } catch (const std::exception& e) {
      spdlog::error("job {} '{}': {} failed: {}", job->live.id(), job->live.name(), what, e.what());
    } catch (...) {
      spdlog::error("job {} '{}': {} failed with an exception that is not a std::exception", job->live.id(),
                    job->live.name(), what);
    }
  });
}

}  // namespace

void Service::attach(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (conn.job) throw RequestError(error::kUnexpected, "this connection is already attached as job " + std::to_string(conn.job->live.id()));
  const auto cfg = config();
  messages::Attach attach = messages::Attach::from_json(body);
  for (const auto& d : attach.devices.devices)
    if (!device_allowed(*cfg, d.name()))
      throw RequestError(error::kPermissionDenied, "device " + d.name() + " is not in this node's device pool ([devices].allow)");
  JobIdentity identity;
  identity.name = std::move(attach.job);
  identity.uid = conn.peer.uid;
  identity.pid = conn.peer.pid;
  identity.sdk_version = std::move(attach.sdk_version);
  identity.torch_version = std::move(attach.torch_version);
  identity.protocol_version = conn.version;
  identity.profile_steps = attach.profile_steps.value_or(0);
  identity.expected_steps = attach.expected_steps;
  identity.devices = std::move(attach.devices);
  EffectivePolicy policy = effective_policy(*cfg, identity.name, identity.uid);
  std::shared_ptr<AttachedJob> job;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    const uint64_t id = next_session_id_++;
    job = std::make_shared<AttachedJob>(id, std::move(identity), std::move(policy), registry_, store_,
                                        policy_pool_.get_executor());
    sessions_[id] = job;
  }
  conn.job = job;
  const LiveSession& s = job->live;
  spdlog::info("job {} '{}' attached (uid {}, pid {}, {} devices; {} / {} / {})", s.id(), s.name(), s.uid(),
               conn.peer.pid, s.devices().size(), s.policy().grouper, s.policy().placer, s.policy().algorithm);
  const auto& e = s.policy().exploration;
  const messages::Attached attached{s.id(), s.policy().grouper, s.policy().placer, s.policy().algorithm,
                                    e.steps_per_candidate, e.warmup_steps, e.max_candidates};
  respond(attached.kType, rid, attached.to_json(), false);
}

void Service::upload_graph(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (!conn.job) throw RequestError(error::kUnexpected, "attach before uploading a graph");
  auto job = conn.job;
  // The session's devices are set at attach and never change: readable off its strand.
  messages::GraphUpload upload = messages::GraphUpload::from_json(body, job->live.devices());
  const double headroom = config()->memory_headroom_fraction;
  // Building the policy objects and grouping can take a while on big graphs: off the I/O thread.
  on_strand(job, "graph upload", [job, upload = std::move(upload), headroom, rid, respond]() mutable {
    try {
      const messages::GraphAccepted accepted =
          job->live.on_graph(std::move(upload.graph), std::move(upload.start), headroom);
      respond(accepted.kType, rid, accepted.to_json(), false);
    } catch (const RequestError& e) {
      reply_error(respond, rid, e.code, e.what());
    }
  });
}

void Service::request_placement(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.job) throw RequestError(error::kUnexpected, "attach before requesting a placement");
  auto job = conn.job;
  on_strand(job, "placement request", [this, job, rid, respond] {
    try {
      const messages::Directive d = job->live.next_directive();
      respond(d.kType, rid, d.to_json(job->live.devices()), false);
      // The job trains from here on: the warm start may run now.
      defer_work(job, respond);
    } catch (const RequestError& e) {
      reply_error(respond, rid, e.code, e.what());
    } catch (const std::exception& e) {
      spdlog::warn("job {} '{}': no placement: {}", job->live.id(), job->live.name(), e.what());
      reply_error(respond, rid, error::kInternal, e.what());
    }
  });
}

void Service::defer_work(const std::shared_ptr<AttachedJob>& job, const Responder& respond) {
  if (!job->live.has_deferred_work()) return;
  on_strand(job, "deferred work", [job, respond] {
    if (auto d = job->live.run_deferred_work()) respond(d->kType, 0, d->to_json(job->live.devices()), false);
  });
}

void Service::step_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  ++reports_received;
  if (!conn.job) throw RequestError(error::kUnexpected, "step report from a connection that is not attached");
  const placement::Measurement m = placement::measurement_from_json(body);
  auto job = conn.job;
  (void)rid;
  // On the session's strand, never on the I/O thread: training the policy may hold the session
  // for seconds, and the I/O thread must not wait for that (every connection would stall, and
  // half-received frames of other jobs would time out). The job does not wait either: the next
  // directive is pushed unsolicited (request id 0). A report is one-way: nothing answers it
  // unless the placement changes.
  on_strand(job, "step report", [job, m, respond] {
    if (auto d = job->live.on_report(m)) respond(d->kType, 0, d->to_json(job->live.devices()), false);
  });
}

void Service::profile_report(ConnectionState& conn, uint32_t rid, const json& body, const Responder& respond) {
  if (!conn.job) throw RequestError(error::kUnexpected, "profile report from a connection that is not attached");
  if (conn.version < placement::protocol::kProfileReportVersion)
    throw RequestError(error::kUnexpected, "profile_report needs protocol version " +
                                               std::to_string(placement::protocol::kProfileReportVersion));
  placement::ProfileReport report = placement::profile_report_from_json(body);
  auto job = conn.job;
  on_strand(job, "profile report", [this, job, report = std::move(report), rid, respond] {
    try {
      job->live.on_profiles(report);
    } catch (const RequestError& e) {
      ++protocol_errors;
      reply_error(respond, rid, e.code, e.what());
      return;
    }
    defer_work(job, respond);
  });
}

void Service::detach(ConnectionState& conn, uint32_t rid, const Responder& respond) {
  if (!conn.job) throw RequestError(error::kUnexpected, "this connection is not attached");
  auto job = conn.job;
  conn.job.reset();
  // After the reports sent before it, and after any policy work in progress (its state is persisted).
  on_strand(job, "detach", [this, job, rid, respond] {
    const messages::Detached detached = job->live.on_detach();
    finish(job);
    spdlog::info("job {} '{}' detached", job->live.id(), job->live.name());
    respond(detached.kType, rid, detached.to_json(), false);
  });
}

void Service::disconnected(ConnectionState& conn) {
  if (!conn.job) return;
  auto job = conn.job;
  conn.job.reset();
  on_strand(job, "disconnect", [this, job] {
    job->live.on_disconnect();
    finish(job);
    spdlog::info("job {} '{}' disconnected without detach; session closed", job->live.id(), job->live.name());
  });
}

void Service::finish(const std::shared_ptr<AttachedJob>& job) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  sessions_.erase(job->live.id());
  finished_.push_back(job);
  if (finished_.size() > kFinishedKept) finished_.pop_front();
}

void Service::persist_all(std::function<void(size_t, size_t)> done) {
  std::vector<std::shared_ptr<AttachedJob>> all;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    for (auto& [id, job] : sessions_) all.push_back(job);
  }
  if (all.empty()) {
    store_.after_writes([done = std::move(done)] { done(0, 0); });
    return;
  }
  struct Progress {
    std::mutex mutex;
    size_t jobs, left, written = 0;
    std::function<void(size_t, size_t)> done;
  };
  auto progress = std::make_shared<Progress>();
  progress->jobs = progress->left = all.size();
  progress->done = std::move(done);
  auto finished_one = [this, progress](bool written) {
    std::lock_guard<std::mutex> lock(progress->mutex);
    progress->written += written ? 1 : 0;
    if (--progress->left > 0) return;
    store_.after_writes([progress] { progress->done(progress->jobs, progress->written); });
  };
  for (auto& job : all)
    boost::asio::post(job->strand, [job, finished_one] {
      bool written = false;
      try {
        written = job->live.persist();
      } catch (const std::exception& e) {
        spdlog::error("job {} '{}': not persisted at shutdown: {}", job->live.id(), job->live.name(), e.what());
      }
      finished_one(written);
    });
}

}  // namespace placementd
