#pragma once
// The job's side of the protocol: attach, graph upload, placements, step and profile reports,
// detach. Each message is decoded and handed to the job's LiveSession; what the session returns is
// sent back.

#include <functional>
#include <memory>

#include "server/handlers.h"
#include "server/service_context.h"

namespace placementd {

void add_job_handlers(HandlerTable& table, ServiceContext& ctx);

/// The job's connection closed without detach: its session ends on its strand (what it measured
/// is persisted) and the job moves to the finished ones.
void end_disconnected_job(ServiceContext& ctx, const std::shared_ptr<AttachedJob>& job);

/// See Service::persist_all.
void persist_jobs(ServiceContext& ctx, std::function<void(size_t jobs, size_t written)> done);

}  // namespace placementd
