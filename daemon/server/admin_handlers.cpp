#include "server/admin_handlers.h"

#include <unistd.h>

#include "live/request_error.h"
#include "placement/inspection.h"
#include "server/version.h"

namespace placementd {

using placement::protocol::MessageType;
namespace error = placement::protocol::error;
namespace messages = placement::messages;

namespace {

void status(ServiceContext& ctx, const ConnectionState& conn, Request& req) {
  const auto cfg = ctx.config();
  const Counters::Snapshot c = ctx.counters.snapshot();
  messages::StatusReply s;
  s.version = kVersion;
  s.pid = ::getpid();
  s.uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count();
  s.config = cfg->path;
  s.socket = ctx.socket_path;
  s.state_dir = ctx.store.dir();
  s.store_failed_writes = ctx.store.failed_writes();
  s.jobs_visible = ctx.jobs.visible(conn.peer).size();
  if (conn.peer.admin) s.jobs_total = ctx.jobs.attached_count();
  s.connections = c.connections_open;
  s.connections_total = c.connections_total;
  s.frames_received = c.frames_received;
  s.reports_received = c.reports_received;
  s.protocol_errors = c.protocol_errors;
  s.plugins = {ctx.registry.count(placement::PluginKind::kGrouper),
               ctx.registry.count(placement::PluginKind::kPlacer),
               ctx.registry.count(placement::PluginKind::kAlgorithm)};
  s.plugins_skipped = ctx.registry.skipped_count();
  s.policy = {cfg->policy.grouper, cfg->policy.placer, cfg->policy.algorithm};
  s.peer = {conn.peer.uid, conn.peer.admin};
  req.respond(s.kType, req.id, s.to_json(), false);
}

// A placementctl older than protocol 4 cannot read the state "following": it sees "attached".
messages::JobSummary for_version(messages::JobSummary summary, uint16_t version) {
  if (version < placement::protocol::kReplicaVersion &&
      summary.state == messages::JobState::kFollowing)
    summary.state = messages::JobState::kAttached;
  return summary;
}

// A session's lock may be held by its policy work for seconds: these run on a policy thread.
void list_jobs(ServiceContext& ctx, Request& req) {
  const messages::ListJobs request = messages::ListJobs::from_json(req.body);
  // Depends on the body, so the route cannot say it.
  if (request.all && !req.peer.admin)
    throw RequestError(error::kPermissionDenied,
                       "listing every user's jobs needs root or the admin group '" +
                           ctx.config()->admin_group + "'");
  messages::JobList list;
  for (const auto& job : ctx.jobs.visible(req.peer, request.finished))
    list.jobs.push_back(for_version(job->live.summary(), req.version));
  req.respond(list.kType, req.id, list.to_json(), false);
}

void show_job(ServiceContext& ctx, Request& req) {
  const uint64_t id = messages::JobShow::from_json(req.body).id;
  for (const auto& job : ctx.jobs.visible(req.peer, true))
    if (job->live.id() == id) {
      messages::JobInfo info = job->live.detail();
      info.job = for_version(std::move(info.job), req.version);
      req.respond(info.kType, req.id, info.to_json(), false);
      return;
    }
  // Another user's job is reported exactly like a missing one: uids see only their own jobs.
  throw RequestError(error::kNotFound, "no job " + std::to_string(id) + " visible to uid " +
                                           std::to_string(req.peer.uid));
}

void list_plugins(ServiceContext& ctx, Request& req) {
  messages::PluginList list;
  for (const auto& p : ctx.registry.plugins()) {
    messages::PluginList::Plugin plugin{p.info.name,
                                        to_string(p.info.kind),
                                        p.info.version,
                                        p.info.summary,
                                        p.file,
                                        p.info.torch_version,
                                        {}};
    for (const auto& h : p.info.hyperparameters)
      plugin.hyperparameters.push_back({h.name, placement::param_type_name(h.default_value),
                                        placement::format_param(h.default_value), h.summary, h.min,
                                        h.max, h.choices});
    list.plugins.push_back(std::move(plugin));
  }
  for (const auto& s : ctx.registry.skipped()) list.skipped.push_back({s.file, s.reason});
  req.respond(list.kType, req.id, list.to_json(), false);
}

// On the I/O thread: a reload swaps the config and plugins every other handler reads.
void reload(ServiceContext& ctx, Request& req) {
  if (!ctx.reload) throw RequestError(error::kInternal, "reload is not available");
  const std::vector<std::string> errors = ctx.reload();
  if (!errors.empty()) {
    std::string text = "config not reloaded, the old one stays in force:";
    for (const auto& e : errors) text += "\n" + e;
    throw RequestError(error::kInvalidConfig, text);
  }
  const messages::Reloaded reloaded{ctx.config()->path, ctx.registry.plugins().size()};
  req.respond(reloaded.kType, req.id, reloaded.to_json(), false);
}

}  // namespace

void add_admin_handlers(HandlerTable& table, ServiceContext& ctx) {
  table.add(MessageType::kStatus,
            on_io_thread(Access::kAnyone, "asking for the status",
                         [&ctx](ConnectionState& conn, Request& req) { status(ctx, conn, req); }));
  table.add(MessageType::kListJobs,
            on_policy_thread(Access::kAnyone, "listing jobs",
                             [&ctx](Request& req) { list_jobs(ctx, req); }));
  table.add(MessageType::kJobShow, on_policy_thread(Access::kAnyone, "showing a job",
                                                    [&ctx](Request& req) { show_job(ctx, req); }));
  table.add(MessageType::kListPlugins,
            on_io_thread(Access::kAnyone, "listing plugins",
                         [&ctx](ConnectionState&, Request& req) { list_plugins(ctx, req); }));
  table.add(MessageType::kReload,
            on_io_thread(Access::kAdmin, "reloading the config",
                         [&ctx](ConnectionState&, Request& req) { reload(ctx, req); }));
}

}  // namespace placementd
