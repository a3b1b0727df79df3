#include "live/refinement.h"

#include <gtest/gtest.h>

namespace placementd {
namespace {

TEST(RefinementState, ItBeginsOnceAndAppliesOnlyWhenToldTo) {
  Refinement not_applied(0.2, 10000);
  EXPECT_FALSE(not_applied.began());
  not_applied.begin(false, {{7, -0.01}}, 100);
  EXPECT_TRUE(not_applied.began());
  EXPECT_FALSE(not_applied.applied());
  EXPECT_FALSE(not_applied.next_contender()) << "a refinement that does not apply has none";

  Refinement r(0.2, 10000);
  r.begin(true, {{7, -0.02}, {9, -0.01}}, 100);
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(r.contenders_left(), 2u);
  const std::optional<Refinement::Contender> first = r.next_contender();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->first, 7u) << "likeliest first, as given";
  EXPECT_EQ(r.contenders_left(), 1u);
  r.end();
  EXPECT_FALSE(r.next_contender()) << "an ended refinement tries no more";
}

TEST(RefinementState, ItsLongTrialsShareWhatIsLeftOfItsFractionOfTheJob) {
  Refinement r(0.2, 10000);  // 2 000 of the job's 10 000 steps
  r.begin(true, {{1, -0.02}, {2, -0.02}, {3, -0.01}}, 1000);
  // At step 1 000 nothing is spent: 2 000 steps, at most half the 9 000 left.
  EXPECT_DOUBLE_EQ(r.long_trial_cap(1000, 0.0), 2000.0);
  EXPECT_EQ(r.steps_left(1000, 400), 2000);
  ASSERT_TRUE(r.next_contender());
  EXPECT_EQ(r.share(1000, 400), 2000 / 3) << "it and the two after it share";
  // 1 500 steps later 500 are left: no longer than a final check of 600 decides anything.
  EXPECT_EQ(r.steps_left(2500, 400), 500);
  EXPECT_EQ(r.steps_left(2500, 600), 0);
  EXPECT_EQ(r.share(2500, 400), 500) << "one share of 400 fits, not two";
  // Near the job's end, half of what it has left bounds a trial.
  Refinement late(0.5, 10000);
  late.begin(true, {}, 9000);
  EXPECT_DOUBLE_EQ(late.long_trial_cap(9000, 0.0), 500.0);
  // A job that says it runs 2^64 steps is bounded all the same.
  Refinement endless(0.2, UINT64_MAX);
  EXPECT_DOUBLE_EQ(endless.long_trial_cap(0, 0.0), Refinement::kMostSteps);
}

TEST(RefinementState, ARunningLongTrialIsMarked) {
  Refinement r(0.2, 10000);
  EXPECT_FALSE(r.running());
  r.set_running(true);
  EXPECT_TRUE(r.running());
}

}  // namespace
}  // namespace placementd
