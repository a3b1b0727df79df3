#include "live/exploration_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace placementd {
namespace {

TEST(ExplorationBudget, TheReferenceIsTheMeanOfThePlacementsLatestSteps) {
  ExplorationBudget budget(0.1, 1000);
  EXPECT_FALSE(budget.reference());
  EXPECT_FALSE(budget.cost_of(2.0)) << "no cost before the reference is measured";
  budget.set_reference({});
  EXPECT_FALSE(budget.reference()) << "no steps: no reference";
  budget.set_reference({1.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(*budget.reference(), 2.0);
  EXPECT_DOUBLE_EQ(*budget.cost_of(2.5), 0.5);
  EXPECT_DOUBLE_EQ(*budget.cost_of(1.5), -0.5) << "a faster step gives time back";
  // Only the latest kReferenceSteps count: an early slow stretch is forgotten.
  std::vector<double> times(ExplorationBudget::kReferenceSteps, 1.0);
  times.insert(times.begin(), 100, 9.0);
  budget.set_reference(times);
  EXPECT_DOUBLE_EQ(*budget.reference(), 1.0);
  budget.set_reference({});
  EXPECT_DOUBLE_EQ(*budget.reference(), 1.0) << "an empty history leaves it as it was";
}

TEST(ExplorationBudget, AJobThatSaidItsStepsMaySpendTheFractionOfTheirTime) {
  ExplorationBudget budget(0.1, 1000);  // 10% of 1 000 steps at 0.2 s: 20 s
  EXPECT_FALSE(budget.spent(1e9)) << "nothing is spent before the reference is measured";
  EXPECT_EQ(budget.used(5.0, 100.0), 0.0);
  budget.set_reference({0.2});
  EXPECT_FALSE(budget.spent(19.9));
  EXPECT_TRUE(budget.spent(20.0));
  EXPECT_DOUBLE_EQ(budget.used(5.0, 100.0), 0.25);
  EXPECT_FALSE(budget.over_pace(10, 1e9, 1.0)) << "a job that said its steps is not paced";
}

TEST(ExplorationBudget, AJobThatSaidNothingIsPacedOverTheTimeMeasured) {
  ExplorationBudget budget(0.1, 0);
  budget.set_reference({0.2});
  EXPECT_FALSE(budget.spent(1e9)) << "no expected steps: no total to spend";
  // 10% of 100 s measured: 10 s; the first candidates run whatever they cost.
  EXPECT_FALSE(budget.over_pace(ExplorationBudget::kCandidatesBeforePacing - 1, 50.0, 100.0));
  EXPECT_FALSE(budget.over_pace(ExplorationBudget::kCandidatesBeforePacing, 10.0, 100.0));
  EXPECT_TRUE(budget.over_pace(ExplorationBudget::kCandidatesBeforePacing, 10.5, 100.0));
  // Paused, it resumes at half the allowance.
  EXPECT_FALSE(budget.may_resume(10.0, 150.0));
  EXPECT_TRUE(budget.may_resume(10.0, 200.0));
  EXPECT_DOUBLE_EQ(budget.used(5.0, 100.0), 0.5);
  EXPECT_EQ(budget.used(5.0, 0.0), 0.0) << "nothing measured yet";
}

TEST(ExplorationBudget, NoFractionUsesNothingOfIt) {
  ExplorationBudget budget(0.0, 1000);
  budget.set_reference({0.2});
  EXPECT_EQ(budget.used(5.0, 100.0), 0.0);
  EXPECT_TRUE(budget.spent(0.0)) << "max_overhead_fraction 0: no step may cost more than its own";
}

}  // namespace
}  // namespace placementd
