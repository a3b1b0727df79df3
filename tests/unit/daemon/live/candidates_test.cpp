// Which of the policy's samples runs (daemon/live/candidates.cpp): with the "simulator" warm start,
// the planning model ranks [policy] screened_samples of them and the one it predicts fastest runs.
// Real plugins (none + feedforward + reinforce) driven as the server drives a session.

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <vector>

#include "built_plugins.h"
#include "live/live_session.h"
#include "planning/sim/simulator.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace msg = placement::messages;
using placement::DeviceKind;

// The planning model's mean step time of the policy's candidates (each placement once) in a job of
// 2000 steps timed by that model itself, with `screened` samples ranked per candidate, until the
// policy proposes only placements it measured (9 candidates as drawn, 4 ranked: drawing more
// samples per candidate scores the policy on more repeats of what it measured, so it settles
// sooner).
double mean_time_of_policy_candidates(int64_t screened, const char* store_name) {
  placement::OpGraph graph = placement::testing::two_chains(6);
  const placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  placement::testing::profile_all(graph, DeviceKind::kCuda, 1e-3);
  const sim::Simulator model(graph, devices);
  testing::TestStore store{store_name};
  JobIdentity identity;
  identity.name = "screened";
  identity.uid = ::getuid();
  identity.pid = ::getpid();
  identity.devices = devices;
  EffectivePolicy policy = testing::simulator_warm_start_policy(0, 30);
  policy.exploration.converge_candidates = 0;
  policy.screened_samples = screened;
  LiveSession live(1, std::move(identity), policy, offline::built_plugins(), *store);
  live.on_graph(graph, std::nullopt, 0.0);
  msg::Directive in_force = live.next_directive();
  std::set<uint64_t> seen;
  double sum = 0;
  for (uint64_t step = 0; step < 2000; ++step) {
    const double t = model.simulate(in_force.placement).step_time_s;
    std::optional<msg::Directive> next = live.on_report({in_force.placement_id, step, t, true, ""});
    if (live.has_deferred_work())
      if (auto pushed = live.run_deferred_work()) next = pushed;
    if (!next) continue;
    in_force = *next;
    if (in_force.reason == msg::Reason::kPolicy && seen.insert(in_force.placement_id).second)
      sum += model.simulate(in_force.placement).step_time_s;
  }
  EXPECT_GE(seen.size(), 2u) << "the policy proposed candidates";
  return seen.empty() ? 0.0 : sum / static_cast<double>(seen.size());
}

TEST(Candidates, ThePlanningModelPicksWhichOfThePolicysSamplesRuns) {
  if (!offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  const double as_drawn = mean_time_of_policy_candidates(1, "candidates_test_drawn");
  const double ranked = mean_time_of_policy_candidates(32, "candidates_test_ranked");
  EXPECT_LT(ranked, 0.98 * as_drawn)
      << "the candidates the model ranked are faster by it than the samples as drawn";
}

}  // namespace
}  // namespace placementd
