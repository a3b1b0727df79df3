#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "metis_placer.h"
#include "placer_inputs.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

TEST(MetisPlacer, OnePartPerDeviceCuttingTheCheapLink) {
  OpGraph g = testing::two_chains(6);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the cheap edge
  const Grouping none = testing::each_op_alone(g);
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
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1 << 30, 1.0},
                              {DeviceKind::kCuda, 0, 1 << 30, 1.0},
                              {DeviceKind::kCuda, 1, 1 << 30, 1.0}};
  MetisPlacer gpus(MetisPlacerOptions{true, 0.5, 1});
  gpus.prepare(g, none, DeviceSet::uniform(list, 1e9, 0), rng);
  for (int d : gpus.place(rng)) EXPECT_NE(d, 0);
}

}  // namespace
}  // namespace placement::plugins
