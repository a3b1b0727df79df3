// PPO against the tabular softmax test double: update weights checked by hand, then
// convergence on the bandit of bandit.h, whose optimum is known.
#include <gtest/gtest.h>

#include "bandit.h"
#include "ppo.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

PpoOptions plain_ppo() {
  PpoOptions o;
  o.minibatch = 2;
  o.epochs = 1;
  o.entropy_weight = 0.0;
  o.clip_norm = 0.0;
  o.learning_rate = 0.5;
  return o;
}

TEST(Ppo, FirstEpochWeighsByAdvantageOverTheBatchMean) {
  testing::TabularPolicy policy(1, 2);
  Ppo ppo(plain_ppo());
  ppo.reset({&policy, -10.0});
  ppo.observe({0}, -1.0, true);
  EXPECT_EQ(policy.apply_calls, 0);
  ppo.observe({1}, -3.0, true);
  ASSERT_EQ(policy.apply_calls, 1);
  // First batch: baseline = its mean (-2); ratio 1; weights = A / n.
  EXPECT_DOUBLE_EQ(policy.last_weights[0], 0.5);
  EXPECT_DOUBLE_EQ(policy.last_weights[1], -0.5);
  // The baseline then absorbs the batch: -2 -> 0.95*-2 + 0.05*-1 -> ... * -3.
  EXPECT_NEAR(ppo.stats().baseline, 0.95 * (0.95 * -2 + 0.05 * -1) + 0.05 * -3, 1e-12);
}

TEST(Ppo, ClippedSamplesStopPushing) {
  testing::TabularPolicy policy(1, 2);
  PpoOptions o = plain_ppo();
  o.epochs = 6;
  o.learning_rate = 2.0;  // big steps: the ratio leaves [1-ε, 1+ε] within a few epochs
  Ppo ppo(o);
  ppo.reset({&policy, -10.0});
  ppo.observe({0}, -1.0, true);
  ppo.observe({1}, -3.0, true);
  EXPECT_EQ(policy.apply_calls, 6);
  EXPECT_GT(ppo.clipped(), 0u);
  // Once both samples are clipped, the last epochs add nothing.
  EXPECT_DOUBLE_EQ(policy.last_weights[0], 0.0);
  EXPECT_DOUBLE_EQ(policy.last_weights[1], 0.0);
}

TEST(Ppo, LearnsTheOptimumOfASmallPlacementProblem) {
  testing::TabularPolicy policy(3, 2);
  PpoOptions o;
  o.learning_rate = 0.5;  // plain gradient ascent in the test double, not Adam
  Ppo ppo(o);
  testing::run_bandit(ppo, policy, 1000);
  testing::expect_learned(policy);
  EXPECT_EQ(ppo.stats().updates, 100u);
}

}  // namespace
}  // namespace placement::plugins
