// A job's devices: their memory and measured links.

#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "placement/job.h"

namespace placement {
namespace {

TEST(JobDevices, LinksBetweenLogicalCpusAreMeasuredOnceAndShared) {
  const DeviceSet set = job_devices({"cpu:0", "cpu:1", "cpu:2"}, 1ull << 30);
  EXPECT_NO_THROW(set.validate());
  const double bandwidth = set.bandwidth[0][1], latency = set.latency[0][1];
  // A clone of 8 MiB in host memory: well above 100 MB/s and below 1 TB/s on any machine.
  EXPECT_GT(bandwidth, 1e8);
  EXPECT_LT(bandwidth, 1e12);
  EXPECT_GT(latency, 0.0);
  EXPECT_LT(latency, 1e-2);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j)
      if (i != j) {
        EXPECT_EQ(set.bandwidth[i][j], bandwidth) << "one physical device: one measurement";
        EXPECT_EQ(set.latency[i][j], latency);
      }
  for (const Device& d : set.devices) EXPECT_EQ(d.memory_bytes, 1ull << 30);
}

TEST(JobDevices, ACpuGetsItsShareOfTheHostsMemory) {
  const DeviceSet one = job_devices({"cpu"}, 0), two = job_devices({"cpu:0", "cpu:1"}, 0);
  EXPECT_GT(one.devices[0].memory_bytes, 0u);
  EXPECT_EQ(two.devices[0].memory_bytes, one.devices[0].memory_bytes / 2);
}

TEST(JobDevices, AGpuThatCannotBeAskedForItsMemoryIsNamed) {
  if (torch::cuda::is_available())
    GTEST_SKIP() << "a GPU answers (tests/unit/sdk/torch/cuda_test.cpp)";
  try {
    job_devices({"cpu", "cuda:0"}, 0);
    FAIL() << "no GPU, and no memory given";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
  }
  try {
    job_devices({"cpu", "cuda:0"}, 1ull << 30);
    FAIL() << "given its memory, a GPU this process cannot use still has no link to measure";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu:0 -> cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace placement
