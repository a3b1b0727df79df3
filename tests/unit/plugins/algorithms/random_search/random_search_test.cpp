// Random search against the tabular softmax test double, on the bandit of bandit.h: it samples
// and remembers, and never trains the policy.
#include <gtest/gtest.h>

#include "bandit.h"
#include "random_search.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

TEST(RandomSearch, NeverTouchesThePolicyAndTracksTheBest) {
  testing::TabularPolicy policy(3, 2);
  RandomSearch r;
  testing::run_bandit(r, policy, 200);
  EXPECT_EQ(policy.accumulate_calls, 0);
  EXPECT_EQ(policy.apply_calls, 0);
  EXPECT_EQ(r.stats().samples, 200u);
  EXPECT_DOUBLE_EQ(r.stats().baseline, -1.0) << "200 uniform draws over 8 actions hit the optimum";
}

}  // namespace
}  // namespace placement::plugins
