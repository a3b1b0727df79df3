// The search behind the simulator warm start: finds known optima, never returns a placement the
// memory model rejects, reports the time of what it returns, and is reproducible.
#include <gtest/gtest.h>

#include <numeric>

#include "planning/sim/annealing.h"
#include "test_graphs.h"

namespace placementd::sim {
namespace {

using placement::DeviceKind;
using placement::Grouping;
using placement::Placement;

// Each op its own group.
Grouping singletons(const placement::OpGraph& g) {
  Grouping grouping;
  grouping.group_of_op.resize(g.ops.size());
  std::iota(grouping.group_of_op.begin(), grouping.group_of_op.end(), 0);
  grouping.num_groups = static_cast<int>(g.ops.size());
  return grouping;
}

// Two independent chains of 6 ops (1 ms forward each) and a join on two GPUs.
Simulator two_chains(uint64_t memory = 1ull << 30) {
  placement::OpGraph g = placement::testing::two_chains(6);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  return Simulator(g, placement::testing::devices(2, DeviceKind::kCuda, memory));
}

TEST(Annealing, SplitsTwoIndependentChainsOverTwoDevices) {
  const Simulator sim = two_chains();
  const Grouping grouping = singletons(sim.graph());
  const double optimum =
      sim.simulate(Placement{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}).step_time_s;
  const double all_on_one = sim.simulate(Placement::single(sim.graph(), 0)).step_time_s;
  ASSERT_LT(optimum, 0.6 * all_on_one);
  AnnealOptions o;
  o.evaluations = 3000;
  const AnnealResult r = anneal(sim, grouping, std::vector<int>(13, 0), o);
  EXPECT_DOUBLE_EQ(r.start_step_time_s, all_on_one);
  EXPECT_LE(r.step_time_s, optimum * 1.0001) << ::testing::PrintToString(r.device_of_group);
  EXPECT_GT(r.evaluations, 1000);
  EXPECT_LE(r.evaluations, 3000)
      << "a swap of two groups on one device is not a move, and not simulated";
  // What it reports is what its placement simulates to.
  EXPECT_DOUBLE_EQ(sim.simulate(Placement::from_groups(grouping, r.device_of_group)).step_time_s,
                   r.step_time_s);
}

TEST(Annealing, WithAnEnsembleItMinimisesTheMeanOverTheModels) {
  // One op on two GPUs. Model A: 1 ms on the first, 3 ms on the second; model B: 5 ms and 1 ms.
  // A alone picks the first GPU; A and B together (means 3 and 2 ms) the second.
  placement::OpGraph g = placement::testing::chain(1);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  auto on = [&](double first_speed, double second_speed) {
    return Simulator(
        g, placement::DeviceSet::uniform({{DeviceKind::kCuda, 0, 1ull << 30, first_speed},
                                          {DeviceKind::kCuda, 1, 1ull << 30, second_speed}},
                                         1e10, 1e-5));
  };
  const Simulator a = on(1.0, 1.0 / 3), b = on(0.2, 1.0);
  AnnealOptions o;
  o.evaluations = 200;
  EXPECT_EQ(anneal(a, singletons(g), {1}, o).device_of_group, std::vector<int>{0});
  o.ensemble = {&b};
  const AnnealResult robust = anneal(a, singletons(g), {0}, o);
  EXPECT_EQ(robust.device_of_group, std::vector<int>{1});
  EXPECT_NEAR(
      robust.step_time_s,
      0.5 * (a.simulate(Placement{{1}}).step_time_s + b.simulate(Placement{{1}}).step_time_s),
      1e-12)
      << "the time it reports is the mean it minimised";
}

TEST(Annealing, NeverReturnsAPlacementThatDoesNotFit) {
  // 13 ops × 100 MiB of parameters (×4 with Adam: value, gradient, two moments) need 5.1 GiB; each
  // 3 GiB device holds about half of them.
  placement::OpGraph g = placement::testing::two_chains(6);
  for (auto& op : g.ops) op.parameter_bytes = 100ull << 20;
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const Simulator sim(g, placement::testing::devices(2, DeviceKind::kCuda, 3ull << 30));
  const Grouping grouping = singletons(g);
  EXPECT_FALSE(sim.simulate(Placement::single(g, 0)).valid);
  try {
    anneal(sim, grouping, std::vector<int>(13, 0), {});
    FAIL() << "an invalid start must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory on"), std::string::npos) << e.what();
  }
  std::vector<int> start = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0};
  AnnealOptions o;
  o.evaluations = 2000;
  const AnnealResult r = anneal(sim, grouping, start, o);
  const SimulationResult check = sim.simulate(Placement::from_groups(grouping, r.device_of_group));
  EXPECT_TRUE(check.valid) << check.invalid_reason;
  EXPECT_LE(r.step_time_s, r.start_step_time_s);
}

TEST(Annealing, KeepsPinnedOpsOnTheirKindAndTimesWhatItReturns) {
  placement::OpGraph g = placement::testing::two_chains(4);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  placement::testing::profile_all(g, DeviceKind::kCpu, 2e-2);
  g.ops[0].pinned = DeviceKind::kCpu;
  std::vector<placement::Device> list = {{DeviceKind::kCpu, 0, 1ull << 30, 1.0},
                                         {DeviceKind::kCuda, 0, 1ull << 30, 1.0},
                                         {DeviceKind::kCuda, 1, 1ull << 30, 1.0}};
  const Simulator sim(g, placement::DeviceSet::uniform(list, 10e9, 1e-5));
  // Groups: op 0 with the rest of its chain, so moving the group to a GPU leaves op 0 on the CPU.
  Grouping grouping;
  grouping.group_of_op = {0, 0, 0, 0, 1, 1, 1, 1, 2};
  grouping.num_groups = 3;
  AnnealOptions o;
  o.evaluations = 500;
  const AnnealResult r = anneal(sim, grouping, {0, 0, 0}, o);
  Placement p = Placement::from_groups(grouping, r.device_of_group);
  p.enforce_pins(g, sim.devices());
  EXPECT_EQ(sim.devices().devices[p.device_of_op[0]].kind, DeviceKind::kCpu);
  EXPECT_DOUBLE_EQ(sim.simulate(p).step_time_s, r.step_time_s);
  EXPECT_LT(r.step_time_s, 0.5 * r.start_step_time_s) << "the GPUs are 20x faster";
}

TEST(Annealing, SameSeedSameAnswer) {
  const Simulator sim = two_chains();
  const Grouping grouping = singletons(sim.graph());
  AnnealOptions o;
  o.evaluations = 200;  // short: the answer still depends on the seed's path
  o.seed = 7;
  const AnnealResult a = anneal(sim, grouping, std::vector<int>(13, 0), o);
  const AnnealResult b = anneal(sim, grouping, std::vector<int>(13, 0), o);
  EXPECT_EQ(a.device_of_group, b.device_of_group);
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_THROW(anneal(sim, grouping, std::vector<int>(12, 0), o), std::invalid_argument);
}

TEST(Annealing, StopsAtItsTimeLimit) {
  const Simulator sim = two_chains();
  AnnealOptions o;
  o.evaluations = int64_t{1} << 40;  // hours of work without the limit
  o.max_seconds = 0.05;
  const AnnealResult r = anneal(sim, singletons(sim.graph()), std::vector<int>(13, 0), o);
  EXPECT_GT(r.evaluations, 0);
  EXPECT_LT(r.evaluations, int64_t{1} << 40);
  EXPECT_LE(r.step_time_s, r.start_step_time_s);
}

}  // namespace
}  // namespace placementd::sim
