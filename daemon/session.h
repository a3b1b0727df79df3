#pragma once
// One attached job: its graph, devices, policy objects and what it measured.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json_fwd.hpp>

#include "config.h"
#include "placement/algorithm.h"
#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/grouper.h"
#include "placement/placement.h"
#include "placement/placer.h"

namespace placementd {

enum class SessionState { kAttached, kReady, kRunning, kDetached };
const char* to_string(SessionState state);

/// Everything measured under one placement directive.
struct CandidateRecord {
  uint64_t id = 0;
  placement::Placement placement;
  /// "start", "cached", "policy".
  std::string reason;
  std::vector<double> step_times;
  uint64_t failures = 0;
  /// Median of the measured steps after `warmup` discarded ones; nullopt while too few.
  std::optional<double> median(int64_t warmup) const;
};

/// A job's session. All members are guarded by `mutex`; the I/O thread and the policy threads
/// both touch sessions, one at a time.
struct Session {
  uint64_t id = 0;
  std::string job;
  uid_t uid = 0;
  pid_t pid = 0;
  std::string sdk_version;
  std::string torch_version;
  SessionState state = SessionState::kAttached;
  std::chrono::system_clock::time_point attached_at;
  std::chrono::steady_clock::time_point attached_steady;

  placement::DeviceSet devices;
  std::optional<placement::OpGraph> graph;
  std::string fingerprint;
  EffectivePolicy policy;
  std::unique_ptr<placement::Grouper> grouper;
  std::unique_ptr<placement::Placer> placer;
  std::unique_ptr<placement::Algorithm> algorithm;
  std::optional<placement::Grouping> grouping;
  std::mt19937_64 rng;

  /// A placement from the store for this (graph, devices), offered first.
  std::optional<placement::Placement> cached;
  std::map<uint64_t, CandidateRecord> candidates;
  uint64_t current_candidate = 0;
  uint64_t steps = 0;
  uint64_t failed_steps = 0;
  double measured_seconds = 0.0;
  /// Step reports that did not match this session (unknown placement id).
  uint64_t stray_reports = 0;

  std::mutex mutex;
  /// Policy work for this session runs here, in the order it was asked for.
  std::optional<boost::asio::strand<boost::asio::thread_pool::executor_type>> strand;

  /// Candidate with the lowest median step time, or nullptr.
  const CandidateRecord* best() const;
  /// Summary for `placementctl jobs` (caller holds the mutex).
  nlohmann::json summary() const;
  /// summary() plus per-candidate detail (caller holds the mutex).
  nlohmann::json detail() const;
};

}  // namespace placementd
