#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "placement/serialization.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"
#include "test_graphs.h"

namespace placementd::sim {
namespace {

using placement::DeviceKind;
using placement::OpGraph;
using placement::Placement;

// Every op: forward 1 s, backward 2 s, update 0.5 s on cpu; `bytes` per edge and output.
OpGraph profiled(OpGraph g, double update = 0.5) {
  for (auto& op : g.ops) op.profile["cpu"] = {1.0, 2.0, update, 100};
  return g;
}

// Devices with 1 GB/s links and no latency, so a 1e9-byte tensor takes exactly 1 s.
placement::DeviceSet slow_links(int n, uint64_t memory = 1ull << 40) {
  auto d = placement::testing::devices(n, DeviceKind::kCpu, memory);
  for (auto& row : d.bandwidth) std::fill(row.begin(), row.end(), 1e9);
  for (auto& row : d.latency) std::fill(row.begin(), row.end(), 0.0);
  return d;
}

TEST(Simulator, ChainOnOneDeviceIsTheSumOfItsOps) {
  const Simulator sim(profiled(placement::testing::chain(3, 1000000000)), slow_links(2));
  const auto r = sim.simulate(Placement{{0, 0, 0}});
  ASSERT_TRUE(r.valid);
  EXPECT_DOUBLE_EQ(r.forward_s, 3.0);
  EXPECT_DOUBLE_EQ(r.backward_s, 3.0 + 6.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 9.0 + 1.5);
  EXPECT_DOUBLE_EQ(r.busy_s[0], 10.5);
  EXPECT_DOUBLE_EQ(r.busy_s[1], 0.0);
  EXPECT_EQ(r.transfers, 0u);
}

TEST(Simulator, SplitChainPaysTheLinkBothWays) {
  // op0 on d0, op1 on d1: forward 1 + 1 (send) + 1; backward 2 (op1) + 1 (gradient back) + 2 (op0);
  // each device then updates its own op in parallel: + 0.5.
  const Simulator sim(profiled(placement::testing::chain(2, 1000000000)), slow_links(2),
                      {2.0, 0.0, false});
  const auto r = sim.simulate(Placement{{0, 1}});
  EXPECT_DOUBLE_EQ(r.forward_s, 3.0);
  EXPECT_DOUBLE_EQ(r.backward_s, 8.0);
  EXPECT_DOUBLE_EQ(r.step_time_s, 8.5);
  EXPECT_EQ(r.transfers, 2u);
  EXPECT_EQ(r.transferred_bytes, 2000000000u);
}

TEST(Simulator, IndependentChainsRunInParallel) {
  // Two chains of 4 joined at the end; tiny tensors so links cost nothing noticeable. The two
  // devices must be really separate (GPUs, or CPUs not modelled as one host).
  OpGraph g = profiled(placement::testing::two_chains(4), 0.0);
  const Simulator sim(g, slow_links(2), {2.0, 0.0, false});
  Placement one = Placement::single(g, 0);
  Placement split = one;
  for (int i = 4; i < 8; ++i) split.device_of_op[i] = 1;
  const double serial = sim.simulate(one).step_time_s;
  const double parallel = sim.simulate(split).step_time_s;
  EXPECT_DOUBLE_EQ(serial, 9 * 3.0);
  EXPECT_NEAR(parallel, 5 * 3.0, 1e-3);  // 4 ops per chain in parallel + the join
  EXPECT_LT(parallel, serial);
}

TEST(Simulator, CpuDevicesShareTheHostByDefault) {
  OpGraph g = profiled(placement::testing::two_chains(4), 0.0);
  const Simulator sim(g, slow_links(2));
  Placement split = Placement::single(g, 0);
  for (int i = 4; i < 8; ++i) split.device_of_op[i] = 1;
  EXPECT_NEAR(sim.simulate(split).step_time_s, 9 * 3.0, 1e-3)
      << "no parallelism between logical CPU devices";
}

TEST(Simulator, DevicesThatShareAnExecutionResourceRunOneOpAtATime) {
  // Three separate devices; 1 and 2 are slices of one card: what runs on them does not overlap.
  OpGraph g = profiled(placement::testing::two_chains(4), 0.0);
  SimulatorOptions options{2.0, 0.0, false};
  options.shared_with = {0, 1, 1};
  const Simulator shared(g, slow_links(3), options);
  const Simulator separate(g, slow_links(3), {2.0, 0.0, false});
  Placement on_slices = Placement::single(g, 1), apart = Placement::single(g, 0);
  for (int i = 4; i < 8; ++i) on_slices.device_of_op[i] = apart.device_of_op[i] = 2;
  EXPECT_NEAR(shared.simulate(on_slices).step_time_s, 9 * 3.0, 1e-3) << "one slice at a time";
  EXPECT_NEAR(separate.simulate(on_slices).step_time_s, 5 * 3.0, 1e-3);
  EXPECT_NEAR(shared.simulate(apart).step_time_s, 5 * 3.0, 1e-3)
      << "device 0 has its own: the chains run at once";
}

TEST(Simulator, SpeedScalesTimes) {
  auto devices = slow_links(2);
  devices.devices[1].speed = 2.0;
  const Simulator sim(profiled(placement::testing::chain(3)), devices);
  EXPECT_DOUBLE_EQ(sim.simulate(Placement{{1, 1, 1}}).step_time_s, 10.5 / 2);
}

TEST(Simulator, OutOfMemoryNamesTheDeviceAndTheBytes) {
  OpGraph g = profiled(placement::testing::chain(2, 1024));
  g.ops[0].parameter_bytes = 1ull << 30;  // ×(2 + 2 for Adam) = 4 GiB
  const Simulator sim(g, slow_links(2, 3ull << 30));
  const auto r = sim.simulate(Placement{{0, 1}});
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.invalid_reason.rfind("out of memory on cpu:0: needs 4.00 GiB", 0), 0u)
      << r.invalid_reason;
  EXPECT_NE(r.invalid_reason.find("has 3.00 GiB"), std::string::npos);
  EXPECT_EQ(r.memory[0].parameters, 4ull << 30);
  // Plain SGD keeps no state: 2 GiB fits.
  const Simulator sgd(g, slow_links(2, 3ull << 30), {0.0, 0.0, true});
  EXPECT_TRUE(sgd.check_memory(Placement{{0, 1}}).valid);
  // Headroom counts against capacity.
  const Simulator tight(g, slow_links(2, 3ull << 30), {0.0, 0.5, true});
  EXPECT_FALSE(tight.check_memory(Placement{{0, 1}}).valid);
}

TEST(Simulator, StepTimeAloneIsSimulatesWithoutTheMemoryCheck) {
  OpGraph g = profiled(placement::testing::chain(3, 1024));
  const Simulator roomy(g, slow_links(2));
  for (const Placement& p : {Placement{{0, 0, 0}}, Placement{{0, 1, 0}}, Placement{{1, 0, 1}}})
    EXPECT_EQ(roomy.step_time_s(p), roomy.simulate(p).step_time_s);
  // A placement that does not fit still has its time; simulate() says it does not fit.
  g.ops[0].parameter_bytes = 1ull << 30;
  const Simulator tight(g, slow_links(2, 3ull << 30));
  ASSERT_FALSE(tight.simulate(Placement{{0, 1, 1}}).valid);
  EXPECT_EQ(tight.step_time_s(Placement{{0, 1, 1}}),
            tight.simulate(Placement{{0, 1, 1}}).step_time_s);
  EXPECT_GT(tight.step_time_s(Placement{{0, 1, 1}}), 0.0);
  // It checks the placement as simulate() does.
  EXPECT_THROW(tight.step_time_s(Placement{{0, 1}}), std::invalid_argument);
  EXPECT_THROW(tight.step_time_s(Placement{{0, 1, 2}}), std::invalid_argument);
}

TEST(Simulator, ReceivedCopiesAreKeptForBackward) {
  const Simulator sim(profiled(placement::testing::chain(2, 5000)), slow_links(2));
  const auto r = sim.check_memory(Placement{{0, 1}});
  EXPECT_EQ(r.memory[1].activations, 100u + 5000u);  // its own activations + the received input
  EXPECT_EQ(r.memory[0].activations, 100u);
}

TEST(Simulator, MissingProfileIsNamed) {
  OpGraph g = profiled(placement::testing::chain(2));
  placement::DeviceSet d = placement::DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 30, 1.0}, {DeviceKind::kCuda, 0, 1ull << 30, 1.0}}, 1e9, 0);
  const Simulator sim(g, d);
  EXPECT_NO_THROW(sim.simulate(Placement{{0, 0}}));
  try {
    sim.simulate(Placement{{0, 1}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "op 1 'layer.1' cannot be timed on cuda:0: it has no cuda profile and the "
                  "graph has no op work to predict one from (the file predates it: re-capture"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(sim.untimeable_ops(1).first, 2u);
  EXPECT_EQ(sim.untimeable_ops(0).first, 0u);
}

// Every op: 1 GFLOP of fp32 matrix product and 1 MB moved each way, no profile.
OpGraph with_work(OpGraph g) {
  placement::testing::give_work(g, 1e9, 1e6, 1000000);
  return g;
}

placement::DeviceSpec teraflop_device() {
  placement::DeviceSpec spec;
  spec.fp32_flops = 1e12;
  spec.memory_bandwidth = 1e11;
  spec.launch_s = 1e-5;
  spec.compute_efficiency = spec.memory_efficiency = 1.0;
  return spec;
}

TEST(Simulator, UnprofiledOpsAreTimedByTheCostModelOnDevicesWithASpec) {
  placement::DeviceSet d =
      placement::DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0},
                                     {DeviceKind::kCuda, 0, 1ull << 30, 1.0, teraflop_device()}},
                                    1e9, 0);
  const Simulator sim(with_work(placement::testing::chain(3)), d);
  const auto r = sim.simulate(Placement{{1, 1, 1}});
  EXPECT_EQ(r.predicted_ops, 3u);
  EXPECT_NEAR(r.forward_s, 3 * (1e-3 + 1e-5), 1e-12);
  EXPECT_NEAR(r.backward_s - r.forward_s, 3 * (2e-3 + 1e-5), 1e-12);
  // Adam: 18 passes over the parameter bytes, one launch per op's parameters, all after backward.
  EXPECT_NEAR(r.step_time_s - r.backward_s, 3 * (18e6 / 1e11 + 1e-5), 1e-12);
  EXPECT_EQ(sim.predicted_op_count(1), 3u);
  // The CPU has no spec: nothing to time the ops by there, and the reason says what to add.
  const auto [count, why] = sim.untimeable_ops(0);
  EXPECT_EQ(count, 3u);
  EXPECT_NE(why.find("it has no cpu profile and cpu:0 has no spec to predict one from (give the "
                     "device spec = "),
            std::string::npos)
      << why;
  EXPECT_THROW(sim.simulate(Placement{{0, 1, 1}}), std::invalid_argument);
  // Only the GPU can time the ops: all their work, update included, is on it, and the bound is the
  // step itself.
  EXPECT_NEAR(sim.lower_bound_s(), r.step_time_s, 1e-9 * r.step_time_s);
}

TEST(Simulator, TheTrainingLoopsOwnCostIsPaidOncePerStepByTheSlowestHostInUse) {
  placement::DeviceSpec fast = teraflop_device(), slow = teraflop_device();
  fast.step_s = 1e-4;
  slow.step_s = 3e-4;
  placement::DeviceSet d =
      placement::DeviceSet::uniform({{DeviceKind::kCuda, 0, 1ull << 30, 1.0, fast},
                                     {DeviceKind::kCuda, 1, 1ull << 30, 1.0, slow}},
                                    1e9, 0);
  const Simulator sim(with_work(placement::testing::chain(3)), d);
  const auto on_fast = sim.simulate(Placement{{0, 0, 0}});
  EXPECT_NEAR(on_fast.step_time_s - on_fast.backward_s, 3 * (18e6 / 1e11 + 1e-5) + 1e-4, 1e-12)
      << "after the update, once, not per op or per device";
  const auto split = sim.simulate(Placement{{0, 1, 0}});
  EXPECT_NEAR(split.step_time_s - split.backward_s, 2 * (18e6 / 1e11 + 1e-5) + 3e-4, 1e-12);
  // Every placement pays at least the least of them.
  EXPECT_GE(on_fast.step_time_s, sim.lower_bound_s());
  d.devices[0].spec->step_s = 0;
  d.devices[1].spec->step_s = 0;
  EXPECT_NEAR(
      sim.lower_bound_s() - Simulator(with_work(placement::testing::chain(3)), d).lower_bound_s(),
      1e-4, 1e-12);
}

TEST(Simulator, ItsGraphCarriesThePredictionsAsProfilesMarkedPredicted) {
  OpGraph g = with_work(placement::testing::chain(2));
  g.ops[0].profile["cpu"] = {0.5, 1.0, 0.0, 100};
  placement::DeviceSet d =
      placement::DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0},
                                     {DeviceKind::kCuda, 0, 1ull << 30, 1.0, teraflop_device()}},
                                    1e9, 0);
  const Simulator sim(g, d);
  const auto& ops = sim.graph().ops;
  ASSERT_TRUE(ops[0].profile.count("cuda") && ops[1].profile.count("cuda"));
  EXPECT_TRUE(ops[1].profile.at("cuda").predicted);
  EXPECT_NEAR(ops[1].profile.at("cuda").forward_s, 1e-3 + 1e-5, 1e-12);
  EXPECT_FALSE(ops[0].profile.at("cpu").predicted) << "measured profiles stay as they were";
  EXPECT_EQ(ops[1].profile.count("cpu"), 0u) << "the CPU has no spec: nothing predicted there";
  // A simulator of that graph (as the planning model with error is made) times alike.
  const Simulator again(sim.graph(), d);
  const Placement on_gpu{{1, 1}};
  EXPECT_DOUBLE_EQ(again.simulate(on_gpu).step_time_s, sim.simulate(on_gpu).step_time_s);
  EXPECT_EQ(again.simulate(on_gpu).predicted_ops, 2u);
}

TEST(Simulator, AProfileForTheDevicesKindWinsOverThePrediction) {
  OpGraph g = with_work(placement::testing::chain(2));
  g.ops[0].profile["cuda"] = {0.5, 1.0, 0.0, 100};
  placement::DeviceSet d = placement::DeviceSet::uniform(
      {{DeviceKind::kCuda, 0, 1ull << 30, 1.0, teraflop_device()}}, 1e9, 0);
  const Simulator sim(g, d);
  const auto r = sim.simulate(Placement{{0, 0}});
  EXPECT_EQ(r.predicted_ops, 1u);
  EXPECT_NEAR(r.forward_s, 0.5 + 1e-3 + 1e-5, 1e-12);
}

TEST(Simulator, TheMemoryFloorSaysWhetherAnyOneDeviceOrAllTogetherCanHoldTheModel) {
  OpGraph g = profiled(placement::testing::chain(3));      // 100 bytes of activations each
  for (auto& op : g.ops) op.parameter_bytes = 1ull << 30;  // x4 with Adam: 4 GiB per op
  const uint64_t needed = 3 * (4ull << 30) + 300;
  const Simulator roomy(g, slow_links(2, 16ull << 30));
  EXPECT_EQ(roomy.memory_floor().bytes, needed);
  EXPECT_TRUE(roomy.memory_floor().fits_one_device);
  const Simulator split(g, slow_links(2, 9ull << 30));
  EXPECT_FALSE(split.memory_floor().fits_one_device);
  EXPECT_TRUE(split.memory_floor().fits_all_devices);
  EXPECT_TRUE(split.check_memory(Placement{{0, 0, 1}}).valid) << "split, it fits";
  const Simulator none(g, slow_links(2, 5ull << 30));
  EXPECT_FALSE(none.memory_floor().fits_all_devices);
}

// A GPU ten times faster than the host that holds only half the model: without its memory, the
// bound would spread 10/11 of the work onto the GPU (10/11 of n); with it, at most half the ops fit
// there and the rest take 10 s each on the host, so no valid placement is faster than 10·n/2.
TEST(Simulator, TheLowerBoundKnowsTheFastDeviceCannotHoldTheModel) {
  const int n = 20;
  OpGraph g;
  for (int i = 0; i < n; ++i) {
    placement::Op op;
    op.id = i;
    op.name = "op" + std::to_string(i);
    op.kind = "aten::mm";
    op.outputs = {{{1}, "float32", 100}};
    op.parameter_bytes = 1ull << 28;  // with gradient and Adam's two states: 1 GiB per op
    op.profile["cpu"] = {4.0, 6.0, 0.0, 100};
    op.profile["cuda"] = {0.4, 0.6, 0.0, 100};
    g.ops.push_back(op);
  }
  auto devices = [](uint64_t gpu_memory) {
    return placement::DeviceSet::uniform(
        {{DeviceKind::kCpu, 0, 1ull << 40, 1.0}, {DeviceKind::kCuda, 0, gpu_memory, 1.0}}, 1e9, 0);
  };
  SimulatorOptions options{2.0, 0.0, false};
  const Simulator roomy(g, devices(1ull << 40), options);
  EXPECT_NEAR(roomy.lower_bound_s(), 10.0 * n / 11, 0.02 * n)
      << "memory-blind: the LP balances the two";
  // Ten ops (10 GiB and their outputs), not eleven.
  const Simulator tight(g, devices((10ull << 30) + 4096), options);
  EXPECT_LE(tight.lower_bound_s(), 10.0 * n / 2 + 1e-9) << "a bound, never above the optimum";
  EXPECT_GE(tight.lower_bound_s(), 0.95 * 10.0 * n / 2) << "and close to it";
  Placement half;
  for (int i = 0; i < n; ++i) half.device_of_op.push_back(i < n / 2 ? 1 : 0);
  const auto r = tight.simulate(half);
  ASSERT_TRUE(r.valid) << r.invalid_reason;
  EXPECT_GE(r.step_time_s + 1e-9, tight.lower_bound_s());
  EXPECT_FALSE(tight.simulate(Placement::single(g, 1)).valid);
  // More than both devices hold: no placement is valid, and the bound says so.
  const Simulator none(g,
                       placement::DeviceSet::uniform({{DeviceKind::kCpu, 0, 5ull << 30, 1.0},
                                                      {DeviceKind::kCuda, 0, 5ull << 30, 1.0}},
                                                     1e9, 0),
                       options);
  EXPECT_TRUE(std::isinf(none.lower_bound_s()));
  // One op's state alone is more than the GPU holds (a large vocabulary's output layer): whatever
  // the rest does, that op runs on the host, and the bound charges it there.
  OpGraph head = g;
  head.ops[0].parameter_bytes = 11ull << 28;  // 11 GiB with its gradient and Adam's states
  const Simulator headed(head, devices((10ull << 30) + 4096), options);
  EXPECT_GE(headed.lower_bound_s(), 10.0 - 1e-9) << "op 0's 10 s on the host";
  Placement head_on_host{std::vector<int>(n, 0)};
  for (int i = 1; i <= n / 2; ++i) head_on_host.device_of_op[i] = 1;
  const auto valid = headed.simulate(head_on_host);
  ASSERT_TRUE(valid.valid) << valid.invalid_reason;
  EXPECT_GE(valid.step_time_s + 1e-9, headed.lower_bound_s());
  EXPECT_FALSE(headed.simulate(half).valid) << "op 0 on the GPU";
  // ... and more than every device holds: no placement is valid.
  head.ops[0].parameter_bytes = 1ull << 40;
  EXPECT_TRUE(std::isinf(Simulator(head, devices(10ull << 30), options).lower_bound_s()));
  // Two ops only the host can hold, and together more than it has, though the model as a whole
  // is less than both devices together: no placement is valid either.
  OpGraph big(g);
  big.ops.resize(3);
  big.ops[0].parameter_bytes = big.ops[1].parameter_bytes = 11ull << 28;
  const Simulator crowded(big,
                          placement::DeviceSet::uniform({{DeviceKind::kCpu, 0, 21ull << 30, 1.0},
                                                         {DeviceKind::kCuda, 0, 10ull << 30, 1.0}},
                                                        1e9, 0),
                          options);
  EXPECT_TRUE(crowded.memory_floor().fits_all_devices);
  EXPECT_TRUE(std::isinf(crowded.lower_bound_s()));
}

TEST(Simulator, NoPlacementBeatsTheLowerBound) {
  OpGraph g = profiled(placement::testing::two_chains(6));
  const Simulator sim(g, slow_links(3), {2.0, 0.0, false});
  const double bound = sim.lower_bound_s();
  EXPECT_DOUBLE_EQ(bound, std::max(7 * 3.0, (13 * 3.5) / 3));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    Placement p;
    for (size_t u = 0; u < g.ops.size(); ++u) p.device_of_op.push_back(static_cast<int>(rng() % 3));
    EXPECT_GE(sim.simulate(p).step_time_s + 1e-9, bound);
  }
}

// Data-parallel replicas: every op of a 3-op chain holds 1 GB of parameters; 4 nodes on a 1 GB/s
// ring, so one op's gradients take 2 × 3 × (1e9 / 4) / 1e9 = 1.5 s to average.
SimulatorOptions four_nodes(uint64_t bucket_bytes, bool overlap, double latency = 0.0) {
  SimulatorOptions o{2.0, 0.0, false};
  o.replicas.count = 4;
  o.replicas.link = {1e9, latency};
  o.replicas.bucket_bytes = bucket_bytes;
  o.replicas.overlap = overlap;
  return o;
}

OpGraph with_parameters(OpGraph g, uint64_t bytes) {
  for (auto& op : g.ops) op.parameter_bytes = bytes;
  return g;
}

TEST(Simulator, ReplicasAverageTheGradientsOverTheNodeLinkBeforeTheUpdate) {
  const OpGraph g = with_parameters(profiled(placement::testing::chain(3, 1000)), 1000000000);
  // One node: forward 3, backward ends at 9 (op 2 at 5, op 1 at 7), update 1.5.
  const auto alone = Simulator(g, slow_links(2), {2.0, 0.0, false}).simulate(Placement{{0, 0, 0}});
  EXPECT_DOUBLE_EQ(alone.step_time_s, 10.5);
  EXPECT_EQ(alone.allreduce_buckets, 0u);

  // After backward, one bucket per op (1 GB buckets): 3 × 1.5 s, all of it waited for.
  const auto after =
      Simulator(g, slow_links(2), four_nodes(1000000000, false)).simulate(Placement{{0, 0, 0}});
  EXPECT_DOUBLE_EQ(after.allreduce_s, 4.5);
  EXPECT_DOUBLE_EQ(after.allreduce_exposed_s, 4.5);
  EXPECT_EQ(after.allreduce_buckets, 3u);
  EXPECT_EQ(after.allreduce_bytes, 3000000000u);
  EXPECT_DOUBLE_EQ(after.step_time_s, 9.0 + 4.5 + 1.5);

  // Overlapped: each bucket goes when backward is done with its op (5, 7, 9): only the last waits.
  const auto overlapped =
      Simulator(g, slow_links(2), four_nodes(1000000000, true)).simulate(Placement{{0, 0, 0}});
  EXPECT_DOUBLE_EQ(overlapped.allreduce_s, 4.5);
  EXPECT_DOUBLE_EQ(overlapped.allreduce_exposed_s, 1.5);
  EXPECT_DOUBLE_EQ(overlapped.step_time_s, 9.0 + 1.5 + 1.5);

  // One 4 GB bucket, ready at 9: overlap gains nothing; each message pays the latency (6 a bucket).
  const auto one = Simulator(g, slow_links(2), four_nodes(4000000000, true, 0.01))
                       .simulate(Placement{{0, 0, 0}});
  EXPECT_EQ(one.allreduce_buckets, 1u);
  EXPECT_NEAR(one.allreduce_s, 4.5 + 6 * 0.01, 1e-12);
  EXPECT_NEAR(one.step_time_s, 9.0 + 4.5 + 0.06 + 1.5, 1e-12);

  // Buckets are per device: a split chain averages its two devices' gradients separately.
  const auto split =
      Simulator(g, slow_links(2), four_nodes(4000000000, false)).simulate(Placement{{0, 1, 1}});
  EXPECT_EQ(split.allreduce_buckets, 2u);
  EXPECT_DOUBLE_EQ(split.allreduce_s, 4.5);
}

TEST(Simulator, ReplicasNeedALinkBetweenNodesAndNoPlacementBeatsTheirBound) {
  SimulatorOptions no_link{2.0, 0.0, false};
  no_link.replicas.count = 8;
  try {
    Simulator(profiled(placement::testing::chain(2, 1000)), slow_links(2), no_link);
    ADD_FAILURE() << "8 replicas without a node link";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(
        e.what(),
        "replicas: 8 nodes need the link between them ([[link]] between = [\"node\", \"node\"])");
  }
  const OpGraph g = with_parameters(profiled(placement::testing::two_chains(6)), 300000000);
  for (bool overlap : {false, true}) {
    const Simulator sim(g, slow_links(3), four_nodes(500000000, overlap, 0.001));
    const double bound = sim.lower_bound_s();
    const double alone = Simulator(g, slow_links(3), {2.0, 0.0, false}).lower_bound_s();
    EXPECT_GT(bound, overlap ? alone - 1e-9 : alone + 1.0) << "overlap " << overlap;
    std::mt19937_64 rng(5);
    for (int i = 0; i < 200; ++i) {
      Placement p;
      for (size_t u = 0; u < g.ops.size(); ++u)
        p.device_of_op.push_back(static_cast<int>(rng() % 3));
      EXPECT_GE(sim.simulate(p).step_time_s + 1e-9, bound) << "overlap " << overlap;
    }
  }
}

}  // namespace
}  // namespace placementd::sim

namespace placementd::sim {
namespace {

// The profiled graphs shipped in tests/data/graphs stay loadable, fully profiled and simulatable.
TEST(ShippedGraphs, LoadAndSimulateOnTheHost) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GRAPH_DIR)) {
    if (!entry.is_regular_file()) continue;  // papers/: no profiles (PapersGraphs)
    const placement::OpGraph g = placement::load_graph_file(entry.path().string());
    for (const auto& op : g.ops)
      ASSERT_EQ(op.profile.count("cpu"), 1u) << entry.path() << ": " << op.name;
    const Simulator sim(g, placement::testing::devices(1, DeviceKind::kCpu, 1ull << 40));
    const auto r = sim.simulate(Placement::single(g, 0));
    double total = 0;
    for (const auto& op : g.ops)
      total += op.profile.at("cpu").forward_s + op.profile.at("cpu").backward_s +
               op.profile.at("cpu").update_s;
    EXPECT_NEAR(r.step_time_s, total, 1e-9 * total)
        << entry.path() << ": one device runs everything in sequence";
    ++seen;
  }
  EXPECT_GE(seen, 6);
}

// The papers' models at the papers' batch sizes (scripts/make-graph-data.sh --papers) carry shapes
// and op work, no profiles: on the shipped GPU topologies the cost model times every op, and the
// two models made not to fit one H100 do not.
TEST(ShippedGraphs, ThePapersModelsAreTimedByTheCostModel) {
  const auto h100s = load_topology(std::string(TOPOLOGY_DIR) + "/4xh100_nvlink.toml");
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(GRAPH_DIR) + "/papers")) {
    const placement::OpGraph g = placement::load_graph_file(entry.path().string());
    for (const auto& op : g.ops) {
      ASSERT_TRUE(op.work) << entry.path() << ": " << op.name;
      ASSERT_TRUE(op.profile.empty()) << entry.path() << ": " << op.name;
    }
    const Simulator sim(g, h100s);
    const auto r = sim.simulate(Placement::single(g, 1));
    EXPECT_EQ(r.predicted_ops, g.ops.size()) << entry.path();
    EXPECT_GT(r.step_time_s, 0.0) << entry.path();
    const std::string name = entry.path().filename().string();
    const bool too_big = name.rfind("gpt2_xl", 0) == 0 || name.rfind("gnmt8_vocab1m", 0) == 0;
    EXPECT_EQ(r.valid, !too_big) << name << ": " << r.invalid_reason;
    EXPECT_GE(r.valid ? r.step_time_s : std::numeric_limits<double>::infinity(),
              sim.lower_bound_s())
        << name;
    ++seen;
  }
  EXPECT_EQ(seen, 12);
}

}  // namespace
}  // namespace placementd::sim
