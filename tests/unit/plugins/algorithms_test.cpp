// The PPO-family algorithms and random search against the tabular softmax test double: update
// weights checked by hand, then convergence on a bandit whose optimum is known.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "post.h"
#include "ppo.h"
#include "random_search.h"
#include "spotlight.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

// 3 groups on 2 devices; step time grows with every group off {1, 0, 1}.
const Action kBest = {1, 0, 1};

double bandit_reward(const Action& a) {
  int wrong = 0;
  for (size_t pos = 0; pos < a.size(); ++pos) wrong += a[pos] != kBest[pos];
  return -std::sqrt(1.0 + wrong);
}

void run_bandit(Algorithm& algorithm, testing::TabularPolicy& policy, int samples) {
  algorithm.reset({&policy, -10.0});
  std::mt19937_64 rng(7);
  for (int i = 0; i < samples; ++i) {
    const Action a = policy.sample(rng);
    algorithm.observe(a, bandit_reward(a), true);
  }
}

void expect_learned(const testing::TabularPolicy& policy) {
  for (int pos = 0; pos < 3; ++pos) EXPECT_GT(policy.probs(pos)[kBest[pos]], 0.9) << "position " << pos;
}

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
  run_bandit(ppo, policy, 1000);
  expect_learned(policy);
  EXPECT_EQ(ppo.stats().updates, 100u);
}

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
  run_bandit(s, policy, 1000);
  expect_learned(policy);
}

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
  run_bandit(post, policy, 1000);
  expect_learned(policy);
  EXPECT_EQ(post.cross_entropy_steps(), 20u);
}

TEST(RandomSearch, NeverTouchesThePolicyAndTracksTheBest) {
  testing::TabularPolicy policy(3, 2);
  RandomSearch r;
  run_bandit(r, policy, 200);
  EXPECT_EQ(policy.accumulate_calls, 0);
  EXPECT_EQ(policy.apply_calls, 0);
  EXPECT_EQ(r.stats().samples, 200u);
  EXPECT_DOUBLE_EQ(r.stats().baseline, -1.0) << "200 uniform draws over 8 actions hit the optimum";
}

}  // namespace
}  // namespace placement::plugins
