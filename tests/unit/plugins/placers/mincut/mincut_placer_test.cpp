#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "mincut_placer.h"
#include "placer_inputs.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

TEST(MincutPlacer, BalancesOverTheGpusOnlyIgnoringSpeeds) {
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1ull << 34, 1.0},
                              {DeviceKind::kCuda, 0, 1ull << 34, 3.0},
                              {DeviceKind::kCuda, 1, 1ull << 34, 1.0}};
  MincutPlacer placer(MincutOptions{0.05, 1});
  const auto p =
      testing::prepared(placer, testing::independent_ops(16), DeviceSet::uniform(list, 1e10, 1e-5));
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 0) << "the CPU gets nothing";
  EXPECT_EQ(std::count(p.begin(), p.end(), 1), 8)
      << "a plain min-cut splits evenly whatever the speeds";
  // Without GPUs it partitions over what there is, and a heavy chain is cut once.
  OpGraph chain = testing::chain(8, 1 << 20);
  testing::profile_all(chain, DeviceKind::kCpu, 1e-3);
  MincutPlacer cpus(MincutOptions{0.05, 1});
  const auto q = testing::prepared(cpus, chain, testing::devices(2));
  int switches = 0;
  for (size_t i = 1; i < q.size(); ++i) switches += q[i] != q[i - 1];
  EXPECT_EQ(switches, 1) << "one cut: two contiguous halves";
}

}  // namespace
}  // namespace placement::plugins
