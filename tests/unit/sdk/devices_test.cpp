#include <gtest/gtest.h>

#include "placement/devices.h"
#include "test_graphs.h"

namespace placement {
namespace {

TEST(Devices, ParsesNames) {
  EXPECT_EQ(parse_device_name("cuda:3").name(), "cuda:3");
  EXPECT_EQ(parse_device_name("cpu").name(), "cpu:0");
  EXPECT_EQ(parse_device_name("cuda:1").kind, DeviceKind::kCuda);
  for (const char* bad : {"gpu:0", "cuda:", "cuda:x", "cuda:-1", ""})
    EXPECT_THROW(parse_device_name(bad), std::invalid_argument) << bad;
}

TEST(Devices, ValidateNamesTheFaultyDevice) {
  DeviceSet set = testing::devices(2);
  set.devices[1].memory_bytes = 0;
  try {
    set.validate();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "device cpu:1 has no memory");
  }
  set = testing::devices(2);
  set.devices[1].index = 0;
  EXPECT_THROW(set.validate(), std::invalid_argument);
  set = testing::devices(2);
  set.bandwidth[0][1] = 0;
  EXPECT_THROW(set.validate(), std::invalid_argument);
  set = testing::devices(2);
  set.latency.pop_back();
  EXPECT_THROW(set.validate(), std::invalid_argument);
  EXPECT_THROW(DeviceSet{}.validate(), std::invalid_argument);
}

TEST(Devices, FingerprintIgnoresLinkFigures) {
  DeviceSet a = testing::devices(2);
  DeviceSet b = testing::devices(2);
  b.bandwidth[0][1] = 1;
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  b.devices[1].memory_bytes += 1;
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.index_of("cpu:1"), 1);
  EXPECT_EQ(a.index_of("cuda:0"), -1);
}

}  // namespace
}  // namespace placement
