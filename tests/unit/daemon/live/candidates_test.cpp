// Which of the policy's samples runs (daemon/live/candidates.cpp): with the "simulator" warm start,
// the planning model ranks [policy] screened_samples of them and the one it predicts fastest runs.
// Real plugins (none + feedforward + reinforce) driven as the server drives a session.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "built_plugins.h"
#include "live/live_session.h"
#include "planning/offline/warm_start.h"
#include "planning/sim/simulator.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace msg = placement::messages;
using placement::DeviceKind;

// A job of this process's uid named `name` on `devices`.
JobIdentity job_on(const char* name, const placement::DeviceSet& devices) {
  JobIdentity identity;
  identity.name = name;
  identity.uid = ::getuid();
  identity.pid = ::getpid();
  identity.devices = devices;
  return identity;
}

// The simulator warm start without convergence, `screened` of the policy's samples ranked.
EffectivePolicy ranking_policy(int64_t screened) {
  EffectivePolicy policy = testing::simulator_warm_start_policy(0, 30);
  policy.exploration.converge_candidates = 0;
  policy.screened_samples = screened;
  return policy;
}

// Runs `steps` steps of the job under the session's directives, each taking `time_of` its
// placement; `moved` sees each directive that moves the job.
void run_job(LiveSession& live, uint64_t steps,
             const std::function<double(const placement::Placement&)>& time_of,
             const std::function<void(const msg::Directive&)>& moved) {
  msg::Directive in_force = live.next_directive();
  for (uint64_t step = 0; step < steps; ++step) {
    std::optional<msg::Directive> next =
        live.on_report({in_force.placement_id, step, time_of(in_force.placement), true, ""});
    if (live.has_deferred_work())
      if (auto pushed = live.run_deferred_work()) next = pushed;
    if (!next) continue;
    in_force = *next;
    moved(in_force);
  }
}

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
  LiveSession live(1, job_on("screened", devices), ranking_policy(screened),
                   offline::built_plugins(), *store);
  live.on_graph(graph, std::nullopt, 0.0);
  std::set<uint64_t> seen;
  double sum = 0;
  const auto time_of = [&](const placement::Placement& p) { return model.simulate(p).step_time_s; };
  run_job(live, 2000, time_of, [&](const msg::Directive& d) {
    if (d.reason == msg::Reason::kPolicy && seen.insert(d.placement_id).second)
      sum += time_of(d.placement);
  });
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

// A job spread over a CPU and a GPU whose start profiled each op on the one kind it runs on (and
// no device spec predicts the rest) under `policy`, for 600 steps: what inspection shows of it
// after, and how many candidates the policy proposed. The CPU's ops are the slow ones.
std::pair<msg::JobInfo, size_t> run_on_half_profiles(const EffectivePolicy& policy,
                                                     const char* store_name) {
  placement::OpGraph graph = placement::testing::two_chains(6);
  placement::DeviceSet devices = placement::testing::devices(2, DeviceKind::kCuda);
  devices.devices[0].kind = DeviceKind::kCpu;
  placement::Placement start;
  for (placement::Op& op : graph.ops) {
    start.device_of_op.push_back(op.id % 2);
    op.profile[op.id % 2 ? "cuda" : "cpu"] = {1e-3, 2e-3, 0.0, op.output_bytes()};
  }
  testing::TestStore store{store_name};
  LiveSession live(1, job_on("unranked", devices), policy, offline::built_plugins(), *store);
  live.on_graph(graph, start, 0.0);
  std::set<uint64_t> policy_candidates;
  const auto time_of = [](const placement::Placement& p) {
    double t = 1e-3;
    for (int d : p.device_of_op) t += d == 0 ? 1e-3 : 0.0;
    return t;
  };
  run_job(live, 600, time_of, [&](const msg::Directive& d) {
    if (d.reason == msg::Reason::kPolicy) policy_candidates.insert(d.placement_id);
  });
  return {live.detail(), policy_candidates.size()};
}

// On the GPU machine a ranking by a model that could not time the samples failed the policy step,
// and exploration ended after two candidates (docs/gpu-runs/2026-11-27-3.md): a ranking is never a
// reason to stop exploring.
TEST(Candidates, AfterASkippedWarmStartThePolicysSamplesRunAsDrawn) {
  if (!offline::built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch: no feedforward placer";
  EffectivePolicy policy = ranking_policy(8);
  // Two groups, each with ops profiled on the CPU alone and ops profiled on the GPU alone: no
  // heuristic placement of them can be timed, and the warm start is skipped.
  policy.grouper = "metis";
  policy.grouper_params = {{"groups", int64_t{2}}};
  const auto [info, proposed] = run_on_half_profiles(policy, "candidates_test_skipped");
  EXPECT_TRUE(info.warm_start.is_object() && info.warm_start["skipped"].is_string())
      << info.warm_start.dump();
  EXPECT_FALSE(info.job.policy_error.has_value()) << *info.job.policy_error;
  EXPECT_GT(proposed, 0u) << "the policy proposed a candidate";
}

// A warm start that ran, on a job profiled on the GPU alone (no CPU spec either): the planning
// model cannot time a sample with an op on the CPU. The first such sample ends the ranking, and
// it and the samples after it run as drawn.
TEST(Candidates, FromTheFirstSampleTheModelCannotTimeTheSamplesRunAsDrawn) {
  testing::TestStore store{"candidates_test_untimeable"};
  testing::SessionSetup setup;
  setup.devices = placement::testing::devices(2, DeviceKind::kCuda);
  setup.devices.devices[0].kind = DeviceKind::kCpu;
  placement::testing::profile_all(setup.graph, DeviceKind::kCuda, 1e-3);
  setup.start = placement::Placement{{1, 1, 1, 1}};
  setup.warm_start = offline::kSimulatorWarmStart;
  setup.exploration.steps_per_candidate = 2;
  setup.exploration.warmup_steps = 0;
  setup.exploration.converge_candidates = 0;
  setup.exploration.max_overhead_fraction = 1.0;
  std::unique_ptr<Session> s = testing::make_test_session(std::move(setup), *store);
  offline::ImitationResult warm;  // its answer is the start, which ran
  warm.baseline = offline::kSimulatorWarmStart;
  warm.action = {1, 1, 1, 1};
  warm.placement = placement::Placement{{1, 1, 1, 1}};
  s->warm_started(warm);
  ASSERT_THROW(s->memory_model()->step_time_s(placement::Placement{{0, 1, 1, 1}}),
               std::invalid_argument)
      << "premise: the model cannot time an op on the CPU";

  // The job's steps: uniform logits put ops on the CPU, where they are slow.
  msg::Directive d = s->start();
  size_t on_the_cpu = 0;
  for (uint64_t step = 0; step < 400 && on_the_cpu < 3; ++step) {
    const int ops_on_cpu = static_cast<int>(
        std::count(d.placement.device_of_op.begin(), d.placement.device_of_op.end(), 0));
    if (!s->record({d.placement_id, step, 1.0 + ops_on_cpu, true, ""})) continue;
    std::optional<msg::Directive> next;
    ASSERT_NO_THROW(next = s->advance(*store));
    if (!next) continue;
    d = *next;
    if (d.reason == msg::Reason::kPolicy &&
        std::count(d.placement.device_of_op.begin(), d.placement.device_of_op.end(), 0) > 0)
      ++on_the_cpu;
  }
  EXPECT_TRUE(s->policy_error().empty()) << s->policy_error();
  EXPECT_EQ(on_the_cpu, 3u) << "policy candidates with ops the model cannot time ran";
}

}  // namespace
}  // namespace placementd
