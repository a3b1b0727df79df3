#include <gtest/gtest.h>

#include "single_device.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

std::vector<int> place(const std::string& device, const DeviceSet& d) {
  const OpGraph g = testing::chain(3);
  const Grouping grouping{{0, 1, 2}, 3};
  SingleDevicePlacer placer(SingleDeviceOptions{device});
  std::mt19937_64 rng(1);
  placer.prepare(g, grouping, d, rng);
  return placer.place(rng);
}

TEST(SingleDevice, FastestPrefersSpeedThenGpu) {
  DeviceSet d = DeviceSet::uniform({{DeviceKind::kCpu, 0, 1 << 20, 1.0},
                                    {DeviceKind::kCuda, 0, 1 << 20, 1.0},
                                    {DeviceKind::kCuda, 1, 1 << 20, 1.0}},
                                   1e9, 0);
  EXPECT_EQ(place("fastest", d), (std::vector<int>{1, 1, 1}));
  d.devices[2].speed = 2.0;
  EXPECT_EQ(place("fastest", d), (std::vector<int>{2, 2, 2}));
}

TEST(SingleDevice, NamedDevice) {
  EXPECT_EQ(place("cpu:1", testing::devices(2)), (std::vector<int>{1, 1, 1}));
  EXPECT_THROW(place("cpu:5", testing::devices(2)), std::invalid_argument);
}

TEST(SingleDevice, HasNoPolicy) {
  EXPECT_EQ(SingleDevicePlacer(SingleDeviceOptions{}).policy(), nullptr);
}

}  // namespace
}  // namespace placement::plugins
