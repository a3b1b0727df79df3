// Post against the tabular softmax test double: update weights checked by hand, then
// convergence on the bandit of bandit.h, whose optimum is known.
#include <gtest/gtest.h>

#include "bandit.h"
#include "post.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

TEST(Post, CrossEntropyStepImitatesTheEliteOfEachWindow) {
  testing::TabularPolicy policy(1, 3);
  PostOptions o;
  o.ppo.minibatch = 1000;  // keep PPO out of the way
  o.elite_window = 4;
  o.elite_count = 2;
  o.ppo.clip_norm = 0.0;
  Post post(o);
  post.reset({&policy, -10.0});
  post.observe({0}, -5.0, true);
  post.observe({1}, -1.0, true);
  post.observe({2}, -9.0, false);  // invalid: never an elite
  EXPECT_EQ(post.cross_entropy_steps(), 0u);
  post.observe({2}, -2.0, true);
  ASSERT_EQ(post.cross_entropy_steps(), 1u);
  EXPECT_EQ(policy.apply_calls, 1);
  EXPECT_DOUBLE_EQ(policy.last_weights[0], 0.5);
  EXPECT_DOUBLE_EQ(policy.last_weights[1], 0.5);
  // elites {1} and {2}: their logits rise, device 0's falls
  EXPECT_GT(policy.logits[0][1], 0.0);
  EXPECT_GT(policy.logits[0][2], 0.0);
  EXPECT_LT(policy.logits[0][0], 0.0);
}

TEST(Post, LearnsTheOptimumOfASmallPlacementProblem) {
  testing::TabularPolicy policy(3, 2);
  PostOptions o;
  o.ppo.learning_rate = 0.5;
  Post post(o);
  testing::run_bandit(post, policy, 1000);
  testing::expect_learned(policy);
  EXPECT_EQ(post.cross_entropy_steps(), 20u);
}

}  // namespace
}  // namespace placement::plugins
