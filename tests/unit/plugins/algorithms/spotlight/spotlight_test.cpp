// Spotlight against the tabular softmax test double: update weights checked by hand, then
// convergence on the bandit of bandit.h, whose optimum is known.
#include <gtest/gtest.h>

#include "bandit.h"
#include "spotlight.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

TEST(Spotlight, WeightsAddTheKlPullToTheAdvantage) {
  testing::TabularPolicy policy(1, 2);
  SpotlightOptions o;
  o.samples_per_iteration = 2;
  o.ascent_steps = 1;
  o.kl_weight = 1.0;
  o.clip_norm = 0.0;
  Spotlight s(o);
  s.reset({&policy, -10.0});
  s.observe({0}, -1.0, true);
  s.observe({1}, -3.0, true);
  ASSERT_EQ(policy.apply_calls, 1);
  EXPECT_DOUBLE_EQ(policy.last_weights[0], (1.0 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(policy.last_weights[1], (-1.0 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(s.last_kl(), 0.0) << "KL is 0 before the first step";
}

TEST(Spotlight, KlGrowsAcrossAscentSteps) {
  testing::TabularPolicy policy(1, 2);
  SpotlightOptions o;
  o.samples_per_iteration = 2;
  o.ascent_steps = 5;
  o.clip_norm = 0.0;
  o.learning_rate = 0.5;
  Spotlight s(o);
  s.reset({&policy, -10.0});
  s.observe({0}, -1.0, true);
  s.observe({1}, -3.0, true);
  EXPECT_EQ(policy.apply_calls, 5);
  EXPECT_GT(s.last_kl(), 0.0);
}

TEST(Spotlight, LearnsTheOptimumOfASmallPlacementProblem) {
  testing::TabularPolicy policy(3, 2);
  SpotlightOptions o;
  o.learning_rate = 0.2;
  Spotlight s(o);
  testing::run_bandit(s, policy, 1000);
  testing::expect_learned(policy);
}

}  // namespace
}  // namespace placement::plugins
