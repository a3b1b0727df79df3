#pragma once
// placementctl's side of the protocol: status, jobs, job show, plugins, reload. Most are open to
// every uid, who sees its own jobs only; each route says what it needs.

#include "server/handlers.h"
#include "server/service_context.h"

namespace placementd {

void add_admin_handlers(HandlerTable& table, ServiceContext& ctx);

}  // namespace placementd
