#include "server/job_handlers.h"

#include <fnmatch.h>
#include <malloc.h>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "live/exploration.h"
#include "live/request_error.h"
#include "placement/serialization.h"
#include "server/job_log.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
namespace messages = placement::messages;

namespace {

bool device_allowed(const Config& config, const std::string& name) {
  for (const std::string& glob : config.allow)
    if (::fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

// Runs `work`, which answers no request, on the job's strand, in its user's turn for a policy
// thread as the job's requests are (a warm start may take minutes). What escapes it is logged:
// an exception out of a policy thread's handler would end the daemon, and with it every job.
template <class Work>
void on_strand(ServiceContext& ctx, const std::shared_ptr<AttachedJob>& job, const char* what,
               Work work) {
  const uid_t uid = job->live.uid();
  auto run = [&ctx, uid, job, what, work = std::move(work)]() mutable {
    {
      const JobLogScope scope(job->live.id(), job->live.name());
      try {
        work();
      } catch (const std::exception& e) {
        spdlog::error("job {} '{}': {} failed: {}", job->live.id(), job->live.name(), what,
                      e.what());
      } catch (...) {
        spdlog::error("job {} '{}': {} failed with an exception that is not a std::exception",
                      job->live.id(), job->live.name(), what);
      }
    }
    ctx.policy_share.done(uid, job.get());
  };
  ctx.policy_share.submit(uid, job.get(), [job, run = std::move(run)]() mutable {
    boost::asio::post(job->strand, std::move(run));
  });
}

// Sends `directive` unsolicited (request id 0): the job applies it between steps.
void push(const Request& req, const messages::Directive& directive) {
  req.respond(directive.kType, 0, directive.to_json(req.job->live.devices()), false);
}

// After a reply went out on the job's strand: queues the session's deferred work (the warm start)
// behind it if some is due, and pushes the directive that work may end with.
void defer_work(ServiceContext& ctx, const Request& req) {
  if (!req.job->live.has_deferred_work()) return;
  on_strand(ctx, req.job, "deferred work", [&ctx, req] {
    const auto start = std::chrono::steady_clock::now();
    if (auto d = req.job->live.run_deferred_work()) push(req, *d);
    ctx.policy_latency.observe_deferred(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });
}

void attach(ServiceContext& ctx, ConnectionState& conn, Request& req) {
  const auto cfg = ctx.config();
  messages::Attach attach = messages::Attach::from_json(req.body);
  for (const auto& d : attach.devices.devices)
    if (!device_allowed(*cfg, d.name()))
      throw RequestError(
          error::kPermissionDenied,
          "device " + d.name() + " is not in this node's device pool ([devices].allow)");
  JobIdentity identity;
  identity.uid = conn.peer.uid;
  identity.pid = conn.peer.pid;
  identity.protocol_version = conn.version;
  identity.attach = std::move(attach);
  // The node's figures ([devices] cpu_spec, cuda_spec) for devices the job sent none for: the
  // simulator can then time what the job has not profiled.
  for (auto& d : identity.attach.devices.devices)
    if (!d.spec) d.spec = d.kind == placement::DeviceKind::kCuda ? cfg->cuda_spec : cfg->cpu_spec;
  EffectivePolicy policy = effective_policy(*cfg, identity.name(), identity.uid);
  conn.job = ctx.jobs.add(std::move(identity), std::move(policy), ctx.registry, ctx.store,
                          ctx.policy_pool.get_executor());
  const LiveSession& job = conn.job->live;
  const JobLogScope scope(job.id(), job.name());
  if (job.follower()) {
    ctx.log_limit.log(
        spdlog::level::info, job.uid(),
        fmt::format(
            "job {} '{}' attached as rank {} of {} in replica group {} (uid {}, pid {}): it "
            "follows rank 0's placement",
            job.id(), job.name(), job.replica()->rank, job.replica()->world_size,
            job.replica()->group, job.uid(), conn.peer.pid));
    messages::Attached attached;
    attached.session = job.id();
    attached.host_pinned_bytes = cfg->host_pinned_budget();
    req.respond(attached.kType, req.id, attached.to_json(), false);
    return;
  }
  const std::string leads =
      job.replica() ? fmt::format(", rank 0 of {} in replica group {}: it places the group",
                                  job.replica()->world_size, job.replica()->group)
                    : std::string();
  ctx.log_limit.log(
      spdlog::level::info, job.uid(),
      fmt::format("job {} '{}' attached (uid {}, pid {}, {} devices; {} / {} / {}){}", job.id(),
                  job.name(), job.uid(), conn.peer.pid, job.devices().size(), job.policy().grouper,
                  job.policy().placer, job.policy().algorithm, leads));
  const auto& e = job.policy().exploration;
  messages::Attached attached;
  attached.session = job.id();
  attached.grouper = job.policy().grouper;
  attached.placer = job.policy().placer;
  attached.algorithm = job.policy().algorithm;
  attached.steps_per_candidate = e.steps_per_candidate;
  attached.warmup_steps = e.warmup_steps;
  attached.max_candidates = e.max_candidates;
  attached.host_pinned_bytes = cfg->host_pinned_budget();
  if (auto notice = short_job_notice(e, job.expected_steps())) {
    ctx.log_limit.log(spdlog::level::info, job.uid(),
                      fmt::format("job {} '{}': {}", job.id(), job.name(), *notice));
    attached.notices.push_back(std::move(*notice));
  }
  req.respond(attached.kType, req.id, attached.to_json(), false);
}

// Building the policy objects and grouping can take a while on big graphs. The decoded document
// (about 20 times the upload's bytes: 420 MiB for an 80k-op graph) is freed before the session is
// built, and the freed heap is handed back, or the daemon would stay at the upload's peak.
void upload_graph(ServiceContext& ctx, Request& req) {
  {
    messages::GraphUpload upload =
        messages::GraphUpload::from_json(req.body, req.job->live.devices());
    req.body = nlohmann::json();
    const messages::GraphAccepted accepted = req.job->live.on_graph(
        std::move(upload.graph), std::move(upload.start), ctx.config()->memory_headroom_fraction);
    req.respond(accepted.kType, req.id, accepted.to_json(), false);
  }
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

void request_placement(ServiceContext& ctx, Request& req) {
  const messages::Directive d = req.job->live.next_directive();
  req.respond(d.kType, req.id, d.to_json(req.job->live.devices()), false);
  // The job trains from here on: the warm start may run now.
  defer_work(ctx, req);
}

// Training the policy may hold the session for seconds; the job does not wait for it. A report is
// one-way: nothing answers it unless the placement changes.
void step_report(Request& req) {
  const placement::messages::StepReport report =
      placement::messages::StepReport::from_json(req.body);
  if (auto d = req.job->live.on_report(report)) {
    spdlog::debug("job {} '{}': placement {} ({}) pushed after step {}", req.job->live.id(),
                  req.job->live.name(), d->placement_id, messages::to_string(d->reason),
                  report.step);
    push(req, *d);
  }
}

void profile_report(ServiceContext& ctx, Request& req) {
  req.job->live.on_profiles(placement::messages::ProfileReport::from_json(req.body));
  defer_work(ctx, req);
}

// After the reports sent before it, and after any policy work in progress (its state is persisted).
void detach(ServiceContext& ctx, Request& req) {
  const messages::Detached detached = req.job->live.on_detach();
  ctx.jobs.finish(req.job);
  ctx.log_limit.log(spdlog::level::info, req.peer.uid,
                    fmt::format("job {} '{}' detached", req.job->live.id(), req.job->live.name()));
  req.respond(detached.kType, req.id, detached.to_json(), false);
}

}  // namespace

void add_job_handlers(HandlerTable& table, ServiceContext& ctx) {
  table.add(MessageType::kAttach,
            on_io_thread(Access::kUnattached, "attaching",
                         [&ctx](ConnectionState& conn, Request& req) { attach(ctx, conn, req); }));
  table.add(MessageType::kGraphUpload,
            on_job_strand("uploading a graph", [&ctx](Request& req) { upload_graph(ctx, req); }));
  table.add(MessageType::kPlacementRequest,
            on_job_strand("requesting a placement",
                          [&ctx](Request& req) { request_placement(ctx, req); }));
  table.add(MessageType::kStepReport, on_job_strand("sending a step report", step_report));
  table.add(MessageType::kProfileReport,
            on_job_strand("sending a profile report", [&ctx](Request& req) {
              profile_report(ctx, req);
            }).needs_version(placement::protocol::kProfileReportVersion));
  table.add(MessageType::kDetach, on_job_strand("detaching", [&ctx](Request& req) {
                                    detach(ctx, req);
                                  }).ending_attachment());
}

void end_disconnected_job(ServiceContext& ctx, const std::shared_ptr<AttachedJob>& job) {
  on_strand(ctx, job, "disconnect", [&ctx, job] {
    job->live.on_disconnect();
    // Logged before the job leaves the list: whoever sees it gone finds the line in the log.
    ctx.log_limit.log(spdlog::level::info, job->live.uid(),
                      fmt::format("job {} '{}' disconnected without detach; session closed",
                                  job->live.id(), job->live.name()));
    ctx.jobs.finish(job);
  });
}

void persist_jobs(ServiceContext& ctx, std::function<void(size_t, size_t)> done) {
  const std::vector<std::shared_ptr<AttachedJob>> all = ctx.jobs.attached();
  if (all.empty()) {
    ctx.store.after_writes([done = std::move(done)] { done(0, 0); });
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
  auto finished_one = [&ctx, progress](bool written) {
    std::lock_guard<std::mutex> lock(progress->mutex);
    progress->written += written ? 1 : 0;
    if (--progress->left > 0) return;
    ctx.store.after_writes([progress] { progress->done(progress->jobs, progress->written); });
  };
  // In the job's turn, as its requests are: what it sent before the shutdown is applied first.
  for (const auto& job : all)
    on_strand(ctx, job, "persisting at shutdown", [job, finished_one] {
      bool written = false;
      try {
        written = job->live.persist();
      } catch (const std::exception& e) {
        spdlog::error("job {} '{}': not persisted at shutdown: {}", job->live.id(),
                      job->live.name(), e.what());
      }
      finished_one(written);
    });
}

}  // namespace placementd
