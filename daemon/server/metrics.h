#pragma once
// What the Prometheus endpoint ([metrics].listen) shows, in the text exposition format: the
// daemon's counters, the policy latency histogram, and every attached job's figures (its step
// times with their 95% intervals, candidates, exploration overhead and budget, state). Collected
// when scraped; a job's series go when it ends. docs/operations.md lists every metric.

#include <string>

namespace placementd {

class ServiceContext;

/// Takes each attached job's lock in turn (its policy work may hold it): call it off the I/O
/// thread.
std::string render_metrics(const ServiceContext& ctx);

}  // namespace placementd
