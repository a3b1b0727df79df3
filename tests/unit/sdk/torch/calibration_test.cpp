// The CPU calibration measures figures a topology can use as they are.

#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "placement/calibration.h"

namespace placement {
namespace {

TEST(CpuCalibration, MeasuresPlausibleAchievedRates) {
  const CpuCalibration c = calibrate_cpu(1);
  EXPECT_EQ(c.threads, 1);
  EXPECT_EQ(at::get_num_threads(), 1) << "the thread setting stays as measured";
  // Any CPU LibTorch runs on does more than 1 GFLOP/s and 1 GB/s, and less than 100 TFLOP/s.
  EXPECT_GT(c.spec.fp32_flops, 1e9);
  EXPECT_LT(c.spec.fp32_flops, 1e14);
  EXPECT_GT(c.spec.memory_bandwidth, 1e9);
  EXPECT_GT(c.spec.launch_s, 1e-7);
  EXPECT_LT(c.spec.launch_s, 1e-2);
  EXPECT_GT(c.spec.conv_efficiency, 0.0);
  EXPECT_LE(c.spec.conv_efficiency, 1.0);
  EXPECT_GE(c.spec.conv_layout_bandwidth, 0.0);
  EXPECT_LT(c.spec.conv_layout_bandwidth, 1e13);
  EXPECT_GT(c.spec.pool_efficiency, 0.0);
  EXPECT_LE(c.spec.pool_efficiency, 1.0);
  // The loop's own cost and an LSTM layer's setup: more than nothing, less than a second.
  EXPECT_GE(c.spec.step_s, 0.0);
  EXPECT_LT(c.spec.step_s, 1.0);
  EXPECT_GE(c.spec.rnn_layer_s, 0.0);
  EXPECT_LT(c.spec.rnn_layer_s, 1.0);
  EXPECT_GT(c.spec.rnn_step_s, 0.0) << "0 would mean a GPU's two launches per step";
  EXPECT_LT(c.spec.rnn_step_s, 1.0);
  EXPECT_EQ(c.spec.compute_efficiency, 1.0);
  EXPECT_EQ(c.spec.preset, "measured");
  DeviceSet set = DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0, c.spec}}, 1e9, 0);
  EXPECT_NO_THROW(set.validate());
}

}  // namespace
}  // namespace placement
