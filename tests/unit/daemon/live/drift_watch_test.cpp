#include "live/drift_watch.h"

#include <gtest/gtest.h>

namespace placementd {
namespace {

TEST(DriftWatch, TheReferenceIsTheMedianOfTheFirstMeasuredSteps) {
  DriftWatch watch(0.1, 5);  // 10% slower for 5 steps; the baseline is kBaselineSteps (more)
  for (int i = 0; i < DriftWatch::kBaselineSteps - 1; ++i) {
    watch.observe(i % 2 ? 1.2 : 1.0, true, true);
    EXPECT_FALSE(watch.reference()) << "after " << i + 1 << " steps";
  }
  watch.observe(5.0, false, true);
  EXPECT_FALSE(watch.reference()) << "an unmeasured step is no part of the baseline";
  watch.observe(1.2, true, true);
  ASSERT_TRUE(watch.reference());
  EXPECT_DOUBLE_EQ(*watch.reference(), 1.1) << "median of 15 × 1.0 and 15 × 1.2";
}

TEST(DriftWatch, DriftIsEnoughSlowStepsInARow) {
  DriftWatch watch(0.1, 3);
  watch.set_reference(1.0);
  watch.observe(1.2, true, true);
  watch.observe(1.2, true, true);
  EXPECT_FALSE(watch.drifted());
  watch.observe(1.05, true, true);  // within the threshold: the run ends
  watch.observe(1.2, true, true);
  watch.observe(1.2, true, true);
  EXPECT_FALSE(watch.drifted());
  watch.observe(1.2, true, false);  // a failed or profiled step ends it too
  EXPECT_FALSE(watch.drifted());
  for (int i = 0; i < 3; ++i) watch.observe(1.2, true, true);
  EXPECT_TRUE(watch.drifted());
}

TEST(DriftWatch, ARestartTakesTheReferenceAfresh) {
  DriftWatch watch(0.1, 3);
  watch.set_reference(1.0);
  for (int i = 0; i < 3; ++i) watch.observe(2.0, true, true);
  ASSERT_TRUE(watch.drifted());
  watch.restart();
  EXPECT_FALSE(watch.drifted());
  EXPECT_FALSE(watch.reference());
  // The machine is slower now: its new steps are the reference, and are no drift.
  for (int i = 0; i < DriftWatch::kBaselineSteps + 3; ++i) watch.observe(2.0, true, true);
  EXPECT_DOUBLE_EQ(*watch.reference(), 2.0);
  EXPECT_FALSE(watch.drifted());
  watch.set_reference(std::nullopt);
  EXPECT_FALSE(watch.reference()) << "a placement not measured yet leaves none";
}

}  // namespace
}  // namespace placementd
