#pragma once
// How long each request kind held a policy thread (its handler's run, lock waits included): the
// histogram the metrics endpoint shows as placementd_policy_seconds{request="..."}.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "placement/protocol.h"

namespace placementd {

class PolicyLatency {
 public:
  PolicyLatency();
  /// Creates the series of every request kind that runs off the I/O thread, before any runs:
  /// observe() then finds them without a registry lock, and a scrape shows them at 0 from start.
  void add(placement::protocol::MessageType type);
  /// Thread-safe. A type never added is not counted (a programming error, not worth a lock).
  void observe(placement::protocol::MessageType type, double seconds);
  /// The session's deferred work (the warm start), which no request asked for.
  void observe_deferred(double seconds) { deferred_->Observe(seconds); }
  std::vector<prometheus::MetricFamily> collect() const { return registry_->Collect(); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* family_;
  std::map<placement::protocol::MessageType, prometheus::Histogram*> by_type_;
  prometheus::Histogram* deferred_;
};

}  // namespace placementd
