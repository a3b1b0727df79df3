#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "list_scheduling.h"
#include "placer_inputs.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

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
  placer.prepare(g, testing::each_op_alone(g), d, rng);
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
    return DeviceSet::uniform(
        {{DeviceKind::kCpu, 0, 1ull << 40, 1.0}, {DeviceKind::kCuda, 0, 1ull << 40, 1.0}},
        bandwidth, 0);
  };
  // 1 GB/s: a second per crossing, far more than the 27 ms the GPU would save.
  EXPECT_EQ(schedule(g, host_and_gpu(1e9)), (std::vector<int>{0, 0, 0, 0, 0, 0}));
  // 1 PB/s: crossing is free, so everything after the first op runs on the GPU.
  EXPECT_EQ(schedule(g, host_and_gpu(1e15)), (std::vector<int>{0, 1, 1, 1, 1, 1}));
}

TEST(ListScheduling, MemoryIsAHardConstraint) {
  // Six ops of 1 GiB parameters each (x4 with gradients and Adam state) and 1 GiB outputs on 18 GiB
  // devices: three ops take 15 GiB and a 1 GiB working buffer, a fourth would need 21; the second
  // device also keeps the 1 GiB it receives. So the placement uses both, three ops each, even
  // though one device would be faster.
  OpGraph g = testing::chain(6, 1ull << 30);
  for (auto& op : g.ops) {
    op.parameter_bytes = 1ull << 30;
    op.profile["cuda"] = {1e-3, 2e-3, 0.0, 0};
  }
  const auto p = schedule(g, gpus(2, 18ull << 30, 1e9));
  EXPECT_EQ(p, (std::vector<int>{0, 0, 0, 1, 1, 1}));
}

// The memory check counts the largest output as a working buffer beside what is kept: an op whose
// 4 GiB of state and 4 GiB of kept output fit a 10 GiB GPU, but not with its 4 GiB output as the
// buffer too (a large vocabulary's logits), goes to the host, however much faster the GPU is.
TEST(ListScheduling, TheWorkingBufferAndReceivedCopiesCountAsTheMemoryCheckCountsThem) {
  OpGraph g = testing::chain(3, 1024);
  for (auto& op : g.ops) {
    op.profile["cpu"] = {10e-3, 20e-3, 0.0, 0};
    op.profile["cuda"] = {1e-3, 2e-3, 0.0, 0};
  }
  g.ops[1].parameter_bytes = 1ull << 30;
  g.ops[1].outputs[0].bytes = 4ull << 30;
  const DeviceSet host_and_gpu = DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 40, 1.0}, {DeviceKind::kCuda, 0, 10ull << 30, 1.0}}, 1e15, 0);
  EXPECT_EQ(schedule(g, host_and_gpu)[1], 0);
  // With 13 GiB the GPU holds it, buffer included.
  const DeviceSet bigger = DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 40, 1.0}, {DeviceKind::kCuda, 0, 13ull << 30, 1.0}}, 1e15, 0);
  EXPECT_EQ(schedule(g, bigger)[1], 1);
}

}  // namespace
}  // namespace placement::plugins
