#include "server/policy_latency.h"

namespace placementd {

namespace {

// 100 µs (a step report) to 30 s (a warm start, a big graph's grouping).
prometheus::Histogram::BucketBoundaries buckets() {
  return {0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0};
}

}  // namespace

PolicyLatency::PolicyLatency() : registry_(std::make_shared<prometheus::Registry>()) {
  family_ = &prometheus::BuildHistogram()
                 .Name("placementd_policy_seconds")
                 .Help(
                     "Time a request's handler ran on a policy thread (lock waits included), by "
                     "request kind")
                 .Register(*registry_);
  deferred_ = &family_->Add({{"request", "deferred_work"}}, buckets());
}

void PolicyLatency::add(placement::protocol::MessageType type) {
  by_type_.emplace(type,
                   &family_->Add({{"request", placement::protocol::to_string(type)}}, buckets()));
}

void PolicyLatency::observe(placement::protocol::MessageType type, double seconds) {
  if (auto it = by_type_.find(type); it != by_type_.end()) it->second->Observe(seconds);
}

}  // namespace placementd
