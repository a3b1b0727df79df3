#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "expert.h"
#include "list_scheduling.h"
#include "metis_placer.h"
#include "mincut_placer.h"
#include "scotch_placer.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

Grouping each_op_alone(const OpGraph& g) {
  Grouping grouping;
  grouping.num_groups = static_cast<int>(g.ops.size());
  for (int i = 0; i < grouping.num_groups; ++i) grouping.group_of_op.push_back(i);
  return grouping;
}

TEST(Expert, LayerIndexComesFromTheModulePath) {
  EXPECT_EQ(ExpertPlacer::layer_of("encoder.layers.3.self_attn/linear.1"), 3);
  EXPECT_EQ(ExpertPlacer::layer_of("decoder.2/lstm"), 2);
  EXPECT_EQ(ExpertPlacer::layer_of("embed_src/embedding"), std::nullopt);
  EXPECT_EQ(ExpertPlacer::layer_of("cat.1"), std::nullopt) << "an op's repeat suffix is not a layer";
}

// A GNMT-like stack: embedding, encoder layers 0..3, attention, decoder layers 0..3, projection.
OpGraph stack() {
  OpGraph g;
  auto add = [&](const std::string& name) {
    const int id = static_cast<int>(g.ops.size());
    g.ops.push_back({id, name, "aten::x", {}, 0, {}, {}});
    if (id > 0) g.edges.push_back({id - 1, id, 4});
    return id;
  };
  add("embed_src/embedding");
  for (int l = 0; l < 4; ++l) add("encoder." + std::to_string(l) + "/lstm");
  add("add");  // residual between layers: follows its producer
  add("attention/softmax");
  for (int l = 0; l < 4; ++l) add("decoder." + std::to_string(l) + "/lstm");
  add("project/linear");
  return g;
}

std::vector<int> place(const OpGraph& g, const DeviceSet& d, bool gpus_only = true) {
  ExpertPlacer placer(ExpertOptions{gpus_only});
  std::mt19937_64 rng(1);
  placer.prepare(g, each_op_alone(g), d, rng);
  return placer.place(rng);
}

TEST(Expert, LayerIOnDeviceIWithEmbeddingFirstAndSoftmaxLast) {
  // cpu:0 then cuda:0..3: with gpus_only the CPU gets nothing.
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1 << 30, 1.0}};
  for (int i = 0; i < 4; ++i) list.push_back({DeviceKind::kCuda, i, 1 << 30, 1.0});
  const DeviceSet d = DeviceSet::uniform(list, 1e9, 0);
  const auto p = place(stack(), d);
  EXPECT_EQ(p, (std::vector<int>{1, 1, 2, 3, 4, 4, 4, 1, 2, 3, 4, 4}));
  // Without the GPU restriction the CPU is device 0 of the stack.
  EXPECT_EQ(place(stack(), d, false)[0], 0);
}

TEST(Expert, MoreLayersThanDevicesShareContiguously) {
  const auto p = place(stack(), testing::devices(2));
  EXPECT_EQ(p[1], 0);   // encoder.0
  EXPECT_EQ(p[2], 0);   // encoder.1
  EXPECT_EQ(p[3], 1);   // encoder.2
  EXPECT_EQ(p[4], 1);   // encoder.3
  EXPECT_EQ(p.back(), 1);  // projection with the last layer
}

TEST(Expert, GroupsFollowTheMajorityOfTheirOps) {
  const OpGraph g = stack();
  Grouping halves{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, 2};
  ExpertPlacer placer(ExpertOptions{false});
  std::mt19937_64 rng(1);
  placer.prepare(g, halves, testing::devices(4), rng);
  EXPECT_EQ(placer.place(rng), (std::vector<int>{0, 3}));
}

}  // namespace
}  // namespace placement::plugins


namespace placement::plugins {
namespace {

TEST(MetisPlacer, OnePartPerDeviceCuttingTheCheapLink) {
  OpGraph g = testing::two_chains(6);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the cheap edge
  const Grouping none = each_op_alone(g);
  MetisPlacer placer(MetisPlacerOptions{false, 0.5, 1});
  std::mt19937_64 rng(1);
  placer.prepare(g, none, testing::devices(2), rng);
  const auto p = placer.place(rng);
  std::set<int> first(p.begin(), p.begin() + 6), second(p.begin() + 6, p.begin() + 12);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin()) << "each chain on its own device";
  EXPECT_EQ(p[12], *first.begin());
  // GPUs only: a CPU in the set gets nothing.
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1 << 30, 1.0}, {DeviceKind::kCuda, 0, 1 << 30, 1.0},
                              {DeviceKind::kCuda, 1, 1 << 30, 1.0}};
  MetisPlacer gpus(MetisPlacerOptions{true, 0.5, 1});
  gpus.prepare(g, none, DeviceSet::uniform(list, 1e9, 0), rng);
  for (int d : gpus.place(rng)) EXPECT_NE(d, 0);
}


OpGraph profiled_chains(int length, uint64_t bytes) {
  OpGraph g = testing::two_chains(length);
  for (auto& op : g.ops) op.profile["cuda"] = {1e-3, 2e-3, 0.0, 1024};
  for (auto& e : g.edges) e.bytes = bytes;
  return g;
}

DeviceSet gpus(int n, uint64_t memory, double bandwidth) {
  std::vector<Device> list;
  for (int i = 0; i < n; ++i) list.push_back({DeviceKind::kCuda, i, memory, 1.0});
  return DeviceSet::uniform(list, bandwidth, 1e-5);
}

std::vector<int> schedule(const OpGraph& g, const DeviceSet& d) {
  ListSchedulingPlacer placer(ListSchedulingOptions{2.0, 0.0});
  std::mt19937_64 rng(1);
  placer.prepare(g, each_op_alone(g), d, rng);
  return placer.place(rng);
}

TEST(ListScheduling, IndependentChainsGoToDifferentDevices) {
  const OpGraph g = profiled_chains(6, 1024);  // cheap tensors: parallelism pays
  const auto p = schedule(g, gpus(2, 1ull << 34, 50e9));
  EXPECT_EQ(std::set<int>(p.begin(), p.begin() + 6).size(), 1u) << "a chain stays together";
  EXPECT_EQ(std::set<int>(p.begin() + 6, p.begin() + 12).size(), 1u);
  EXPECT_NE(p[0], p[6]) << "the two chains run in parallel";
}

TEST(ListScheduling, MovesToTheFasterDeviceOnlyWhenTheLinkAllowsIt) {
  // The first op can only run on the CPU (no cuda profile); the rest are 10x faster on the GPU.
  // Whether they follow it there is decided by what crossing the link costs: 1 GiB per edge.
  OpGraph g = testing::chain(6, 1ull << 30);
  g.ops[0].profile["cpu"] = {1e-3, 2e-3, 0.0, 0};
  for (size_t i = 1; i < g.ops.size(); ++i) {
    g.ops[i].profile["cpu"] = {10e-3, 20e-3, 0.0, 0};
    g.ops[i].profile["cuda"] = {1e-3, 2e-3, 0.0, 0};
  }
  auto host_and_gpu = [](double bandwidth) {
    return DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 40, 1.0}, {DeviceKind::kCuda, 0, 1ull << 40, 1.0}}, bandwidth, 0);
  };
  // 1 GB/s: a second per crossing, far more than the 27 ms the GPU would save.
  EXPECT_EQ(schedule(g, host_and_gpu(1e9)), (std::vector<int>{0, 0, 0, 0, 0, 0}));
  // 1 PB/s: crossing is free, so everything after the first op runs on the GPU.
  EXPECT_EQ(schedule(g, host_and_gpu(1e15)), (std::vector<int>{0, 1, 1, 1, 1, 1}));
}

TEST(ListScheduling, MemoryIsAHardConstraint) {
  // Six ops of 1 GiB parameters each (x4 with gradients and Adam state) on 16 GiB devices: at most
  // three per device, so the placement must use both even though one device would be faster.
  OpGraph g = testing::chain(6, 1ull << 30);
  for (auto& op : g.ops) {
    op.parameter_bytes = 1ull << 30;
    op.profile["cuda"] = {1e-3, 2e-3, 0.0, 0};
  }
  const auto p = schedule(g, gpus(2, 16ull << 30, 1e9));
  const auto count0 = std::count(p.begin(), p.end(), 0);
  EXPECT_EQ(count0, 3);
  EXPECT_EQ(static_cast<long>(p.size()) - count0, 3);
}


std::vector<int> prepared(Placer& placer, const OpGraph& g, const DeviceSet& d) {
  std::mt19937_64 rng(1);
  placer.prepare(g, each_op_alone(g), d, rng);
  return placer.place(rng);
}

// `n` independent ops of equal work (1 ms forward on cuda), no traffic.
OpGraph independent_ops(int n) {
  OpGraph g;
  for (int i = 0; i < n; ++i) g.ops.push_back({i, "op." + std::to_string(i), "aten::x", {}, 0, {}, {}});
  testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  return g;
}

DeviceSet gpu_set(std::vector<double> speeds) {
  std::vector<Device> list;
  for (size_t i = 0; i < speeds.size(); ++i) list.push_back({DeviceKind::kCuda, static_cast<int>(i), 1ull << 34, speeds[i]});
  return DeviceSet::uniform(list, 1e10, 1e-5);
}

TEST(ScotchPlacer, CutsTheCheapLinkBetweenTwoHeavyChains) {
  OpGraph g = testing::two_chains(6);
  testing::profile_all(g, DeviceKind::kCpu, 1e-3);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the cheap edge
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.2, 1});
  const auto p = prepared(placer, g, testing::devices(2));
  const std::set<int> first(p.begin(), p.begin() + 6), second(p.begin() + 6, p.begin() + 12);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin()) << "each chain on its own device";
  EXPECT_EQ(p[12], *first.begin()) << "the join with the chain it is tied to by the heavy edge";
}

TEST(ScotchPlacer, GivesAFasterDeviceAProportionateShare) {
  const auto p = [] {
    ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
    return prepared(placer, independent_ops(16), gpu_set({3.0, 1.0}));
  }();
  const auto on_fast = std::count(p.begin(), p.end(), 0);
  EXPECT_GE(on_fast, 11) << "3:1 speeds: 12 of 16 equal ops on the fast device";
  EXPECT_LE(on_fast, 13);
}

TEST(ScotchPlacer, PowerComesFromTheProfilesOfEachDeviceKind) {
  // The CPU profile is 20× the GPU's: the CPU gets about 1/21 of 42 equal ops, not half.
  OpGraph g = independent_ops(42);
  for (auto& op : g.ops) op.profile["cpu"] = {20e-3, 40e-3, 0.0, 0};
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1ull << 34, 1.0}, {DeviceKind::kCuda, 0, 1ull << 34, 1.0}};
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
  const auto p = prepared(placer, g, DeviceSet::uniform(list, 1e10, 1e-5));
  EXPECT_LE(std::count(p.begin(), p.end(), 0), 3);
}

TEST(ScotchPlacer, KeepsHeavyTrafficOnTheFastLinks) {
  // A -> B and C -> D carry 1 GiB, B -> C 1 KiB. Devices {0,1} and {2,3} are NVLink pairs (300 GB/s),
  // across pairs PCIe (16 GB/s): A and B must share a pair, C and D the other.
  OpGraph g;
  for (int i = 0; i < 4; ++i) g.ops.push_back({i, std::string(1, static_cast<char>('A' + i)), "aten::x", {}, 0, {}, {}});
  g.edges = {{0, 1, 1ull << 30}, {1, 2, 1024}, {2, 3, 1ull << 30}};
  testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  DeviceSet d = gpu_set({1, 1, 1, 1});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) d.bandwidth[i][j] = (i / 2 == j / 2) ? 300e9 : 16e9;
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
  const auto p = prepared(placer, g, d);
  EXPECT_EQ(std::set<int>(p.begin(), p.end()).size(), 4u) << "balanced: one op per device";
  EXPECT_EQ(p[0] / 2, p[1] / 2) << "A and B over NVLink";
  EXPECT_EQ(p[2] / 2, p[3] / 2) << "C and D over NVLink";
}

TEST(ScotchPlacer, SameSeedSamePlacementAndGpusOnlyLeavesTheCpuOut) {
  OpGraph g = testing::chain(40, 1 << 20);
  testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1ull << 34, 0.05}};
  for (int i = 0; i < 3; ++i) list.push_back({DeviceKind::kCuda, i, 1ull << 34, 1.0});
  const DeviceSet d = DeviceSet::uniform(list, 1e10, 1e-5);
  ScotchPlacer a(ScotchPlacerOptions{false, 0.05, 7}), b(ScotchPlacerOptions{false, 0.05, 7});
  EXPECT_EQ(prepared(a, g, d), prepared(b, g, d));
  ScotchPlacer gpus(ScotchPlacerOptions{true, 0.05, 7});
  for (int dev : prepared(gpus, g, d)) EXPECT_NE(dev, 0);
}

TEST(MincutPlacer, BalancesOverTheGpusOnlyIgnoringSpeeds) {
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1ull << 34, 1.0}, {DeviceKind::kCuda, 0, 1ull << 34, 3.0},
                              {DeviceKind::kCuda, 1, 1ull << 34, 1.0}};
  MincutPlacer placer(MincutOptions{0.05, 1});
  const auto p = prepared(placer, independent_ops(16), DeviceSet::uniform(list, 1e10, 1e-5));
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 0) << "the CPU gets nothing";
  EXPECT_EQ(std::count(p.begin(), p.end(), 1), 8) << "a plain min-cut splits evenly whatever the speeds";
  // Without GPUs it partitions over what there is, and a heavy chain is cut once.
  OpGraph chain = testing::chain(8, 1 << 20);
  testing::profile_all(chain, DeviceKind::kCpu, 1e-3);
  MincutPlacer cpus(MincutOptions{0.05, 1});
  const auto q = prepared(cpus, chain, testing::devices(2));
  int switches = 0;
  for (size_t i = 1; i < q.size(); ++i) switches += q[i] != q[i - 1];
  EXPECT_EQ(switches, 1) << "one cut: two contiguous halves";
}

}  // namespace
}  // namespace placement::plugins
