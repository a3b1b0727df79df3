#include <gtest/gtest.h>

#include "live/profile_gaps.h"
#include "test_graphs.h"

namespace placementd {
namespace {

using placement::OpProfile;

// Four ops: two matrix products and two ReLUs. Ops 0 (mm) and 2 (relu) ran on both kinds, the mm
// 10 times slower on the CPU, the ReLU 2 times; op 1 (mm) only on the GPU, op 3 (relu) only on
// the CPU (a start that interleaves them, then the all-on-GPU candidate without op 3).
placement::OpGraph interleaved() {
  placement::OpGraph g = placement::testing::chain(4);
  g.ops[0].kind = g.ops[1].kind = "aten::mm";
  g.ops[2].kind = g.ops[3].kind = "aten::relu";
  g.ops[0].profile["cuda"] = {0.001, 0.002, 0.0001, 64};
  g.ops[0].profile["cpu"] = {0.010, 0.020, 0.0010, 64};
  g.ops[1].profile["cuda"] = {0.003, 0.006, 0.0002, 128};
  g.ops[2].profile["cuda"] = {0.001, 0.001, 0.0, 32};
  g.ops[2].profile["cpu"] = {0.002, 0.002, 0.0, 32};
  g.ops[3].profile["cpu"] = {0.004, 0.004, 0.0, 16};
  return g;
}

TEST(ProfileGaps, AMissingKindIsScaledByOpsOfTheSameKindMeasuredOnBoth) {
  placement::OpGraph g = interleaved();
  EXPECT_EQ(fill_profile_gaps(g, {"cpu", "cuda"}), 2u);
  const OpProfile& mm_on_cpu = g.ops[1].profile.at("cpu");
  EXPECT_TRUE(mm_on_cpu.predicted);
  EXPECT_DOUBLE_EQ(mm_on_cpu.forward_s, 0.030);
  EXPECT_DOUBLE_EQ(mm_on_cpu.backward_s, 0.060);
  EXPECT_DOUBLE_EQ(mm_on_cpu.update_s, 0.002);
  EXPECT_EQ(mm_on_cpu.activation_bytes, 128u);
  const OpProfile& relu_on_gpu = g.ops[3].profile.at("cuda");
  EXPECT_TRUE(relu_on_gpu.predicted);
  EXPECT_DOUBLE_EQ(relu_on_gpu.forward_s, 0.002);
  EXPECT_FALSE(g.ops[0].profile.at("cpu").predicted) << "measured profiles stay as they are";
}

TEST(ProfileGaps, AnOpKindNeverMeasuredOnBothTakesTheMedianOfAllOps) {
  placement::OpGraph g = interleaved();
  g.ops[1].kind = "aten::addmm";  // no addmm ran on both kinds
  fill_profile_gaps(g, {"cpu", "cuda"});
  // The ratios of the ops measured on both: 10 (mm) and 2 (relu); of two, the upper.
  EXPECT_DOUBLE_EQ(g.ops[1].profile.at("cpu").forward_s, 0.030);
  EXPECT_DOUBLE_EQ(g.ops[3].profile.at("cuda").forward_s, 0.002) << "relu's own ratio still";
}

TEST(ProfileGaps, AMeasurementReplacesWhatWasFilledAndPinnedOpsStayPut) {
  placement::OpGraph g = interleaved();
  g.ops[3].pinned = placement::DeviceKind::kCpu;
  EXPECT_EQ(fill_profile_gaps(g, {"cpu", "cuda"}), 1u) << "op 3 never runs on the GPU";
  EXPECT_FALSE(g.ops[3].profile.count("cuda"));
  g.ops[1].profile["cpu"] = {0.020, 0.040, 0.001, 128, false};  // a candidate measured it
  EXPECT_EQ(fill_profile_gaps(g, {"cpu", "cuda"}), 0u);
  EXPECT_DOUBLE_EQ(g.ops[1].profile.at("cpu").forward_s, 0.020);
  EXPECT_FALSE(g.ops[1].profile.at("cpu").predicted);
}

TEST(ProfileGaps, NothingIsFilledWithoutAnOpMeasuredOnBothKinds) {
  placement::OpGraph g = placement::testing::chain(2);
  g.ops[0].profile["cpu"] = {0.001, 0.002, 0.0, 0};
  g.ops[1].profile["cuda"] = {0.001, 0.002, 0.0, 0};
  EXPECT_EQ(fill_profile_gaps(g, {"cpu", "cuda"}), 0u);
  EXPECT_EQ(g.ops[0].profile.size(), 1u);
  EXPECT_EQ(g.ops[1].profile.size(), 1u);
}

}  // namespace
}  // namespace placementd
