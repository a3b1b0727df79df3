#include "server/job_log.h"

namespace placementd {

namespace {
thread_local const JobLogScope* innermost = nullptr;
}

JobLogScope::JobLogScope(uint64_t id, const std::string& name)
    : id(id), name(name), outer_(innermost) {
  innermost = this;
}

JobLogScope::~JobLogScope() { innermost = outer_; }

const JobLogScope* JobLogScope::current() { return innermost; }

}  // namespace placementd
