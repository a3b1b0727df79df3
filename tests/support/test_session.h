#pragma once
// A Session over test doubles (one group per op, a tabular placer, a recording algorithm unless a
// test brings its own), built through the calls LiveSession makes: what the state machine's unit
// tests and the noise harness drive with made-up step times.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "live/session.h"
#include "live/store.h"
#include "plugin_doubles.h"
#include "test_graphs.h"

namespace placementd::testing {

/// What the job attaches with and uploads; every field has the value most tests want.
struct SessionSetup {
  uint64_t id = 1;
  std::string name = "test";
  uid_t uid = 0;
  /// Four ops in a chain, two CPUs of 1 GiB.
  placement::OpGraph graph = placement::testing::chain(4, 1024);
  placement::DeviceSet devices = placement::testing::devices(2, placement::DeviceKind::kCpu);
  /// The placement the job runs when it attaches (nullopt: all on its first device).
  std::optional<placement::Placement> start;
  uint64_t expected_steps = 0;
  uint16_t protocol_version = 1;
  int64_t profile_steps = 0;
  ExplorationConfig exploration;
  /// [policy] warm_start and screened_samples: no warm start runs by itself in a Session (a test
  /// gives one with Session::warm_started), but "simulator" has the planning model rank samples.
  std::string warm_start;
  int64_t screened_samples = 8;
  /// nullptr: OneGroupPerOp, TabularPlacer, RecordingAlgorithm.
  std::unique_ptr<placement::Grouper> grouper;
  std::unique_ptr<placement::Placer> placer;
  std::unique_ptr<placement::Algorithm> algorithm;
};

/// Attaches, then takes the setup's graph (finding what `store` holds for uid and graph).
inline std::unique_ptr<Session> make_test_session(SessionSetup setup, const Store& store) {
  JobIdentity job;
  job.attach.job = setup.name;
  job.uid = setup.uid;
  job.attach.expected_steps = setup.expected_steps;
  job.protocol_version = setup.protocol_version;
  job.attach.profile_steps = setup.profile_steps;
  job.attach.devices = std::move(setup.devices);
  EffectivePolicy policy;
  policy.grouper = "one_group_per_op";
  policy.placer = "tabular";
  policy.algorithm = "recording";
  policy.exploration = setup.exploration;
  policy.warm_start = setup.warm_start;
  policy.screened_samples = setup.screened_samples;
  auto session = std::make_unique<Session>(setup.id, std::move(job), std::move(policy));
  Session::Plugins plugins;
  plugins.grouper = setup.grouper ? std::move(setup.grouper)
                                  : std::make_unique<placement::testing::OneGroupPerOp>();
  plugins.placer = setup.placer ? std::move(setup.placer)
                                : std::make_unique<placement::testing::TabularPlacer>();
  plugins.algorithm = setup.algorithm ? std::move(setup.algorithm)
                                      : std::make_unique<placement::testing::RecordingAlgorithm>();
  session->take_graph(std::move(setup.graph), std::move(setup.start), std::move(plugins), {},
                      store);
  return session;
}

/// The policy of the live tests that run the real plugins: none + feedforward + reinforce with
/// the "simulator" warm start (bounded by its evaluation count, so deterministic) refitted
/// `refits` times; candidates of 4 steps without warm-up, trials of 2-step windows, no pacing.
inline EffectivePolicy simulator_warm_start_policy(int64_t refits, int64_t max_candidates) {
  EffectivePolicy policy;
  policy.grouper = "none";
  policy.placer = "feedforward";
  policy.algorithm = "reinforce";
  policy.warm_start = "simulator";
  policy.warm_start_seconds = 0;
  policy.refits = refits;
  policy.exploration.steps_per_candidate = 4;
  policy.exploration.warmup_steps = 0;
  policy.exploration.max_candidates = max_candidates;
  policy.exploration.max_overhead_fraction = 1.0;
  policy.exploration.trial_window_steps = 2;
  return policy;
}

}  // namespace placementd::testing
