#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "live/exploration.h"
#include "plugins/plugin_registry.h"
#include "plugin_doubles.h"
#include "test_graphs.h"
#include "test_store.h"

namespace placementd {
namespace {

using placement::Placement;
using placement::testing::OneGroupPerOp;
using placement::testing::RecordingAlgorithm;
using placement::testing::TabularPlacer;

class Exploration : public ::testing::Test {
 protected:
  // Four ops in a chain, one group each, two devices; `memory` bytes per device.
  void make_session(std::unique_ptr<placement::Algorithm> algorithm = nullptr, uint64_t memory = 1ull << 30) {
    s.graph = placement::testing::chain(4, 1024);
    s.devices = placement::testing::devices(2, placement::DeviceKind::kCpu, memory);
    s.grouper = std::make_unique<OneGroupPerOp>();
    s.placer = std::make_unique<TabularPlacer>();
    s.pipeline = std::make_unique<PolicyPipeline>(*s.grouper, *s.placer, *s.graph, s.devices, s.rng);
    if (!algorithm) algorithm = std::make_unique<RecordingAlgorithm>();
    s.algorithm = std::move(algorithm);
    s.algorithm->reset({s.pipeline->policy(), s.policy.exploration.failing_reward});
    s.memory_model.emplace(*s.graph, s.devices);
    s.policy.exploration.steps_per_candidate = 4;
    s.policy.exploration.warmup_steps = 1;
    s.policy.exploration.max_candidates = 10;
    s.policy.exploration.converge_candidates = 0;
    s.policy.exploration.drift_steps = 3;
    s.policy.exploration.max_overhead_fraction = 1.0;  // no pacing, unless a test sets one
  }
  RecordingAlgorithm& recorder() { return static_cast<RecordingAlgorithm&>(*s.algorithm); }

  // The "job": an op on device 1 runs in 1 time unit, on device 0 in 2 (so all-on-1 is best),
  // scaled by `slowdown`. Runs steps under `d` until the session wants to advance, then advances.
  std::optional<Directive> run_candidate(const Directive& d, double slowdown = 1.0, uint64_t max_steps = 1000) {
    for (uint64_t i = 0; i < max_steps; ++i) {
      double t = 0;
      for (int dev : d.placement.device_of_op) t += dev == 1 ? 1.0 : 2.0;
      if (record_report(s, {d.placement_id, step++, t * slowdown * (i == 0 ? 3.0 : 1.0), true, ""}))
        return advance_session(s, *store);
    }
    ADD_FAILURE() << "the session never advanced";
    return std::nullopt;
  }

  testing::TestStore store{"exploration_test"};
  Session s;
  uint64_t step = 0;
};

TEST_F(Exploration, ProfilesTheJobsOwnPlacementFirstThenSamplesThePolicy) {
  make_session();
  const Directive first = start_session(s);
  EXPECT_EQ(first.reason, Reason::kStart);
  EXPECT_EQ(first.placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(s.state, SessionState::kProfiling);
  // k - 1 good steps: nothing to decide yet.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(record_report(s, {first.placement_id, step++, 8.0, true, ""}));
  ASSERT_TRUE(record_report(s, {first.placement_id, step++, 8.0, true, ""}));
  EXPECT_FALSE(record_report(s, {first.placement_id, step++, 8.0, true, ""})) << "one advance at a time";
  const auto next = advance_session(s, *store);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->reason, Reason::kPolicy);
  EXPECT_EQ(s.state, SessionState::kExploring);
  EXPECT_TRUE(recorder().observations.empty()) << "the start placement is no sample of the policy";
  // The start is now the stored best for this graph and device set.
  const auto stored = store->best(*s.graph, s.devices);
  ASSERT_TRUE(stored);
  EXPECT_DOUBLE_EQ(stored->step_time_s, 8.0);
}

TEST_F(Exploration, ProfiledStepsCountAsStepsButAreNoMeasurement) {
  make_session();
  const Directive first = start_session(s);
  // Three steps under the job's profiler, slowed by it: not part of the median.
  for (int i = 0; i < 3; ++i) {
    placement::Measurement m{first.placement_id, step++, 80.0, true, ""};
    m.profiled = true;
    EXPECT_FALSE(record_report(s, m));
  }
  EXPECT_EQ(s.steps, 3u);
  EXPECT_EQ(s.profiled_steps, 3u);
  EXPECT_TRUE(s.candidates.at(first.placement_id).step_times.empty());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(record_report(s, {first.placement_id, step++, 8.0, true, ""}));
  ASSERT_TRUE(record_report(s, {first.placement_id, step++, 8.0, true, ""}));
  EXPECT_EQ(*s.candidates.at(first.placement_id).median(s.policy.exploration.warmup_steps), 8.0);
  // What the profiler cost beyond the start's own 8 per step is overhead: 3 × (80 − 8) of 272.
  EXPECT_DOUBLE_EQ(s.profiling_overhead_seconds(), 216.0);
  EXPECT_DOUBLE_EQ(s.summary().exploration_overhead, 216.0 / 272.0);
}

TEST_F(Exploration, AllOnOneDeviceIsTriedRightAfterAStartThatSplits) {
  make_session();
  s.job_start = Placement{{0, 1, 0, 1}};
  const auto second = run_candidate(start_session(s));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, Reason::kSingleDevice);
  EXPECT_EQ(second->placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  const auto third = run_candidate(*second);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->reason, Reason::kPolicy);
  EXPECT_TRUE(recorder().observations.empty()) << "neither is a sample of the policy";
}

TEST_F(Exploration, AWarmStartsPlacementIsItsFirstCandidateAndScoredAsItsAction) {
  make_session();
  offline::ImitationResult warm;
  warm.baseline = "simulator";
  warm.action = {1, 1, 0, 1};
  warm.placement = Placement{{1, 1, 0, 1}};
  s.warm_start = warm;
  const auto second = run_candidate(start_session(s));  // start all on 0: single device is that
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, Reason::kWarmStart);
  EXPECT_EQ(second->placement.device_of_op, (std::vector<int>{1, 1, 0, 1}));
  const auto third = run_candidate(*second);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->reason, Reason::kPolicy);
  ASSERT_EQ(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].action, warm.action);
  EXPECT_DOUBLE_EQ(recorder().observations[0].reward, -std::sqrt(5.0)) << "median of 1+1+2+1 time units";
}

TEST_F(Exploration, ASkippedWarmStartOffersNothing) {
  make_session();
  offline::ImitationResult warm;
  warm.baseline = "simulator";
  warm.skipped = "simulator search: the graph has no profile";
  s.warm_start = warm;
  const auto next = run_candidate(start_session(s));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->reason, Reason::kPolicy);
}

TEST_F(Exploration, AllOnOneDeviceIsNotOfferedWhenItDoesNotFit) {
  make_session(nullptr, 1 << 20);
  for (auto& op : s.graph->ops) op.parameter_bytes = 100 << 10;
  s.memory_model.emplace(*s.graph, s.devices);
  ASSERT_FALSE(s.memory_model->check_memory(Placement::single(*s.graph, 0)).valid) << "premise: one device is too small";
  ASSERT_TRUE(s.memory_model->check_memory(Placement{{0, 1, 0, 1}}).valid) << "premise: the split fits";
  s.job_start = Placement{{0, 1, 0, 1}};
  const auto next = run_candidate(start_session(s));
  ASSERT_TRUE(next);
  EXPECT_NE(next->reason, Reason::kSingleDevice);
  for (const auto& [id, c] : s.candidates) EXPECT_NE(c.reason, Reason::kSingleDevice);
}

TEST_F(Exploration, RewardIsMinusRootOfTheMedianAfterWarmup) {
  make_session();
  const auto second = run_candidate(start_session(s));
  ASSERT_TRUE(second);
  const std::vector<double> times = {50.0, 4.0, 9.0, 1.0};  // the first is warm-up
  for (double t : times) record_report(s, {second->placement_id, step++, t, true, ""});
  ASSERT_TRUE(advance_session(s, *store));
  // The first observation is the finished candidate's (later ones score repeated samples).
  ASSERT_GE(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].action, second->placement.device_of_op);
  EXPECT_DOUBLE_EQ(recorder().observations[0].reward, -std::sqrt(4.0));
  EXPECT_TRUE(recorder().observations[0].valid);
}

TEST_F(Exploration, AFailedStepEndsTheCandidateWithTheFailingReward) {
  make_session();
  const auto second = run_candidate(start_session(s));
  ASSERT_TRUE(second);
  ASSERT_TRUE(record_report(s, {second->placement_id, step++, 0.5, false, "out of memory"}));
  const auto third = advance_session(s, *store);
  ASSERT_TRUE(third);
  EXPECT_NE(third->placement_id, second->placement_id);
  ASSERT_GE(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].reward, s.policy.exploration.failing_reward);
  EXPECT_FALSE(recorder().observations[0].valid);
  EXPECT_EQ(s.failed_steps, 1u);
  EXPECT_EQ(s.best()->id, 1u) << "a failed candidate is never the best";
}

TEST_F(Exploration, CandidatesTheMemoryModelRejectsNeverRun) {
  // 4 ops of 1 KiB output each and a device 1 too small for any of them: every sample that uses
  // device 1 is rejected before it runs.
  make_session(nullptr, 1ull << 30);
  s.devices.devices[1].memory_bytes = 512;
  s.memory_model.emplace(*s.graph, s.devices);
  std::optional<Directive> d = start_session(s);
  for (int i = 0; i < 20 && d && s.state != SessionState::kExploiting; ++i) {
    for (int dev : d->placement.device_of_op) ASSERT_EQ(dev, 0) << "a rejected candidate was sent";
    d = run_candidate(*d);
  }
  EXPECT_EQ(s.state, SessionState::kExploiting);
  EXPECT_GT(s.rejected, 0u);
  EXPECT_EQ(s.rejected_by_device["cpu:1"], s.rejected);
  size_t invalid = 0;
  for (const auto& o : recorder().observations) invalid += o.valid ? 0 : 1;
  EXPECT_EQ(invalid, s.rejected) << "each rejection is a failing-reward sample";
}

TEST_F(Exploration, ExploitsTheBestAfterTheBudgetAndReexploresOnDrift) {
  make_session();
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_LE(static_cast<int64_t>(s.candidates.size()), s.policy.exploration.max_candidates);
  const CandidateRecord* best = s.best();
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(d->placement_id, best->id);
  for (const auto& [id, c] : s.candidates)
    if (auto m = c.median(1)) {
      EXPECT_GE(*m, *best->median(1));
    }
  EXPECT_LE(*best->median(1), 8.0) << "never worse than the start";

  // Steady step times on the best: no directive.
  const double best_time = *best->median(1);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(record_report(s, {d->placement_id, step++, best_time, true, ""}));
  // 30% slower for drift_steps steps: re-measure the best, then a few new samples.
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(record_report(s, {d->placement_id, step++, best_time * 1.3, true, ""}));
  ASSERT_TRUE(record_report(s, {d->placement_id, step++, best_time * 1.3, true, ""}));
  d = advance_session(s, *store);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kRemeasure);
  EXPECT_EQ(s.state, SessionState::kReexploring);
  EXPECT_EQ(s.reexplorations, 1u);
  EXPECT_EQ(s.best(), nullptr) << "what was measured before the drift is stale";
  int reexplored = 0;
  while (d && s.state == SessionState::kReexploring) {
    reexplored += d->reason == Reason::kReexplore ? 1 : 0;
    d = run_candidate(*d, 1.3);
  }
  EXPECT_EQ(s.state, SessionState::kExploiting);
  EXPECT_GT(reexplored, 0);
  EXPECT_LE(reexplored, 3);
}

TEST_F(Exploration, ExpectedStepsBoundTheExplorationOverhead) {
  make_session();
  s.policy.exploration.max_candidates = 1000;
  s.policy.exploration.max_overhead_fraction = 0.05;
  s.expected_steps = 200;  // 10 exploration steps: 3 candidates of 4 steps
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  EXPECT_EQ(s.state, SessionState::kExploiting);
  EXPECT_GE(s.exploration_steps, 10u);
  EXPECT_LE(s.exploration_steps, 12u);
  EXPECT_EQ(s.summary().budget_used, 1.0);
}

TEST_F(Exploration, WithoutExpectedStepsExplorationIsPacedByTheJobsTime) {
  make_session();
  s.policy.exploration.max_candidates = 1000;
  s.policy.exploration.max_overhead_fraction = 0.25;
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_TRUE(s.paused);
  EXPECT_TRUE(s.summary().paused);
  EXPECT_GE(s.candidates.size(), 3u) << "the first candidates always run";
  EXPECT_GT(s.exploration_seconds, 0.25 * s.measured_seconds);

  for (int cycle = 0; cycle < 2; ++cycle) {
    // The job trains on the best; exploration resumes once its share is down to half the budget.
    const double best_time = *s.best()->median(1);
    for (int guard = 0; !record_report(s, {d->placement_id, step++, best_time, true, ""}); ++guard)
      ASSERT_LT(guard, 100000) << "never resumed";
    EXPECT_LE(s.exploration_seconds, 0.125 * s.measured_seconds);
    EXPECT_GT(s.exploration_seconds, 0.125 * (s.measured_seconds - best_time)) << "resumes at the first chance";
    d = advance_session(s, *store);
    ASSERT_TRUE(d);
    EXPECT_EQ(s.state, SessionState::kExploring);
    EXPECT_FALSE(s.paused);
    EXPECT_EQ(d->reason, Reason::kPolicy);
    // New candidates until the pace is exceeded again, by at most the last candidate's time.
    const size_t before = s.candidates.size();
    double last_candidate = 0;
    while (d && s.state != SessionState::kExploiting) {
      const double explored = s.exploration_seconds;
      d = run_candidate(*d);
      last_candidate = s.exploration_seconds - explored;
    }
    ASSERT_TRUE(d);
    EXPECT_TRUE(s.paused) << "cycle " << cycle;
    EXPECT_GT(s.candidates.size(), before);
    EXPECT_GT(s.exploration_seconds, 0.25 * s.measured_seconds);
    EXPECT_LE(s.exploration_seconds - last_candidate, 0.25 * (s.measured_seconds - last_candidate));
  }
}

TEST_F(Exploration, StopsEarlyWhenCandidatesStopImproving) {
  make_session();
  s.policy.exploration.max_candidates = 1000;
  s.policy.exploration.converge_candidates = 3;
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  EXPECT_EQ(s.state, SessionState::kExploiting);
  EXPECT_LT(s.candidates.size(), 1000u);
  EXPECT_GE(s.since_improvement, 3);
}

TEST_F(Exploration, RepeatedSamplesAreScoredFromTheirMeasurementNotRunAgain) {
  make_session();
  s.policy.exploration.max_candidates = 1000;
  // A policy certain of one placement: after it ran once, every further sample is a repeat.
  auto& table = *static_cast<TabularPlacer&>(*s.placer).table;
  for (auto& row : table.logits) row = {-50.0, 50.0};
  std::optional<Directive> d = start_session(s);
  d = run_candidate(*d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  d = run_candidate(*d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_EQ(s.candidates.size(), 2u);
  EXPECT_GT(s.repeats_scored, 0u);
  EXPECT_DOUBLE_EQ(recorder().observations.back().reward, -std::sqrt(4.0));
}

TEST_F(Exploration, ARealAlgorithmFindsTheFastestPlacement) {
  PluginRegistry registry;
  registry.scan({PLUGIN_DIR});
  make_session(registry.create_algorithm("reinforce", {}));
  s.policy.exploration.max_candidates = 200;
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  ASSERT_NE(s.best(), nullptr);
  EXPECT_EQ(s.best()->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(*s.best()->median(1), 4.0);
  EXPECT_DOUBLE_EQ(s.summary().speedup.value(), 2.0);
  // The search got within 2% when the first all-on-cpu:1 candidate finished measuring.
  uint64_t first_optimal_step = 0;
  for (const auto& [id, c] : s.candidates)
    if (c.placement.device_of_op == std::vector<int>{1, 1, 1, 1}) {
      first_optimal_step = *c.measured_at_step;
      break;
    }
  EXPECT_EQ(s.summary().steps_to_within_2pct.value(), first_optimal_step);
  EXPECT_EQ(first_optimal_step % 4, 0u) << "measured after whole candidates of 4 steps";
}

TEST_F(Exploration, TheNextSessionStartsFromThePersistedBest) {
  make_session();
  std::optional<Directive> d = start_session(s);
  while (d && s.state != SessionState::kExploiting) d = run_candidate(*d);
  persist_best(s, *store);
  persist_policy(s, *store);
  const Placement best = s.best()->placement;
  EXPECT_TRUE(store->policy_state(*s.graph, s.devices, policy_key(s)));

  Session next;
  next.graph = s.graph;
  next.devices = s.devices;
  next.cached = store->best(*s.graph, s.devices)->placement;
  const Directive first = start_session(next);
  EXPECT_EQ(first.reason, Reason::kCached);
  EXPECT_EQ(first.placement.device_of_op, best.device_of_op);
}

TEST_F(Exploration, ReportsOfUnknownPlacementsAreStray) {
  make_session();
  start_session(s);
  EXPECT_FALSE(record_report(s, {99, 0, 1.0, true, ""}));
  EXPECT_EQ(s.stray_reports, 1u);
  EXPECT_EQ(s.steps, 0u);
}

}  // namespace
}  // namespace placementd
