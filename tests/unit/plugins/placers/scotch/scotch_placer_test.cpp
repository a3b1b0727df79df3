#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "placer_inputs.h"
#include "scotch_placer.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

DeviceSet gpu_set(std::vector<double> speeds) {
  std::vector<Device> list;
  for (size_t i = 0; i < speeds.size(); ++i)
    list.push_back({DeviceKind::kCuda, static_cast<int>(i), 1ull << 34, speeds[i]});
  return DeviceSet::uniform(list, 1e10, 1e-5);
}

TEST(ScotchPlacer, CutsTheCheapLinkBetweenTwoHeavyChains) {
  OpGraph g = testing::two_chains(6);
  testing::profile_all(g, DeviceKind::kCpu, 1e-3);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the cheap edge
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.2, 1});
  const auto p = testing::prepared(placer, g, testing::devices(2));
  const std::set<int> first(p.begin(), p.begin() + 6), second(p.begin() + 6, p.begin() + 12);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin()) << "each chain on its own device";
  EXPECT_EQ(p[12], *first.begin()) << "the join with the chain it is tied to by the heavy edge";
}

TEST(ScotchPlacer, GivesAFasterDeviceAProportionateShare) {
  const auto p = [] {
    ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
    return testing::prepared(placer, testing::independent_ops(16), gpu_set({3.0, 1.0}));
  }();
  const auto on_fast = std::count(p.begin(), p.end(), 0);
  EXPECT_GE(on_fast, 11) << "3:1 speeds: 12 of 16 equal ops on the fast device";
  EXPECT_LE(on_fast, 13);
}

TEST(ScotchPlacer, PowerComesFromTheProfilesOfEachDeviceKind) {
  // The CPU profile is 20× the GPU's: the CPU gets about 1/21 of 42 equal ops, not half.
  OpGraph g = testing::independent_ops(42);
  for (auto& op : g.ops) op.profile["cpu"] = {20e-3, 40e-3, 0.0, 0};
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1ull << 34, 1.0},
                              {DeviceKind::kCuda, 0, 1ull << 34, 1.0}};
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
  const auto p = testing::prepared(placer, g, DeviceSet::uniform(list, 1e10, 1e-5));
  EXPECT_LE(std::count(p.begin(), p.end(), 0), 3);
}

TEST(ScotchPlacer, KeepsHeavyTrafficOnTheFastLinks) {
  // A -> B and C -> D carry 1 GiB, B -> C 1 KiB. Devices {0,1} and {2,3} are NVLink pairs (300
  // GB/s), across pairs PCIe (16 GB/s): A and B must share a pair, C and D the other.
  OpGraph g;
  for (int i = 0; i < 4; ++i)
    g.ops.push_back({i, std::string(1, static_cast<char>('A' + i)), "aten::x", {}, 0, {}, {}});
  g.edges = {{0, 1, 1ull << 30}, {1, 2, 1024}, {2, 3, 1ull << 30}};
  testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  DeviceSet d = gpu_set({1, 1, 1, 1});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) d.bandwidth[i][j] = (i / 2 == j / 2) ? 300e9 : 16e9;
  ScotchPlacer placer(ScotchPlacerOptions{false, 0.05, 1});
  const auto p = testing::prepared(placer, g, d);
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
  EXPECT_EQ(testing::prepared(a, g, d), testing::prepared(b, g, d));
  ScotchPlacer gpus(ScotchPlacerOptions{true, 0.05, 7});
  for (int dev : testing::prepared(gpus, g, d)) EXPECT_NE(dev, 0);
}

}  // namespace
}  // namespace placement::plugins
