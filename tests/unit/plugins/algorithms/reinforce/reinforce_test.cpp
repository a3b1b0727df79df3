#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "reinforce.h"
#include "tabular_policy.h"

namespace placement::plugins {
namespace {

TEST(Reinforce, UpdateUsesAdvantageOverTheBaselineAsComputedByHand) {
  testing::TabularPolicy policy(1, 2);
  ReinforceOptions o;
  o.samples_per_update = 2;
  o.baseline_decay = 0.5;
  o.learning_rate = 0.3;
  o.clip_norm = 0.0;
  Reinforce r(o);
  r.reset({&policy, -10.0});
  EXPECT_DOUBLE_EQ(r.stats().baseline, -10.0) << "the baseline starts at the failing reward";
  r.observe({0}, -1.0, true);
  EXPECT_EQ(policy.apply_calls, 0) << "no update before samples_per_update samples";
  r.observe({1}, -3.0, true);
  ASSERT_EQ(policy.apply_calls, 1);
  // weights = (R - B) / k with B = -10, k = 2
  EXPECT_DOUBLE_EQ(policy.last_weights[0], 4.5);
  EXPECT_DOUBLE_EQ(policy.last_weights[1], 3.5);
  // gradient at uniform p = (0.5, 0.5): 4.5*(1-0.5, -0.5) + 3.5*(-0.5, 0.5) = (0.5, -0.5); step 0.3
  EXPECT_NEAR(policy.logits[0][0], 0.15, 1e-12);
  EXPECT_NEAR(policy.logits[0][1], -0.15, 1e-12);
  // baseline: -10 -> 0.5*-10 + 0.5*-1 = -5.5 -> 0.5*-5.5 + 0.5*-3 = -4.25
  EXPECT_DOUBLE_EQ(r.stats().baseline, -4.25);
  EXPECT_EQ(r.stats().updates, 1u);
  EXPECT_DOUBLE_EQ(policy.last_settings.learning_rate, 0.3);
}

TEST(Reinforce, InvalidSamplesAreIgnoredAfterTheThreshold) {
  testing::TabularPolicy policy(1, 2);
  ReinforceOptions o;
  o.samples_per_update = 1;
  o.valid_only_after = 1;
  Reinforce r(o);
  r.reset({&policy, -10.0});
  r.observe({0}, -10.0, false);  // sample 1: still learned from
  EXPECT_EQ(r.stats().updates, 1u);
  r.observe({0}, -10.0, false);  // sample 2: past the threshold, skipped
  EXPECT_EQ(r.stats().updates, 1u);
  EXPECT_EQ(r.stats().samples, 2u);
}

TEST(Reinforce, WithoutAPolicyOnlyCounts) {
  Reinforce r(ReinforceOptions{});
  r.reset({nullptr, -10.0});
  for (int i = 0; i < 8; ++i) r.observe({}, -1.0, true);
  EXPECT_EQ(r.stats().samples, 8u);
  EXPECT_EQ(r.stats().updates, 0u);
}

// A bandit with a known optimum: 3 groups on 2 devices, step time 1 s only for {1, 0, 1}.
TEST(Reinforce, LearnsTheOptimumOfASmallPlacementProblem) {
  testing::TabularPolicy policy(3, 2);
  Reinforce r(ReinforceOptions{});
  r.reset({&policy, -10.0});
  std::mt19937_64 rng(7);
  const Action best = {1, 0, 1};
  for (int i = 0; i < 2000; ++i) {
    const Action a = policy.sample(rng);
    int wrong = 0;
    for (int pos = 0; pos < 3; ++pos) wrong += a[pos] != best[pos];
    r.observe(a, -std::sqrt(1.0 + wrong), true);
  }
  for (int pos = 0; pos < 3; ++pos)
    EXPECT_GT(policy.probs(pos)[best[pos]], 0.95) << "position " << pos;
}

}  // namespace
}  // namespace placement::plugins
