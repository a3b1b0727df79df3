#pragma once
// A placement problem with a known optimum, for checking that an algorithm converges: 3 groups
// on 2 devices, sampled from the tabular softmax test double (mocks/tabular_policy.h).

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "placement/algorithm.h"
#include "placement/policy.h"
#include "tabular_policy.h"

namespace placement::testing {

// Step time grows with every group off {1, 0, 1}.
inline const Action kBest = {1, 0, 1};

inline double bandit_reward(const Action& a) {
  int wrong = 0;
  for (size_t pos = 0; pos < a.size(); ++pos) wrong += a[pos] != kBest[pos];
  return -std::sqrt(1.0 + wrong);
}

/// Resets `algorithm` on `policy` (failing reward -10) and feeds it `samples` draws, seed 7.
inline void run_bandit(Algorithm& algorithm, TabularPolicy& policy, int samples) {
  algorithm.reset({&policy, -10.0});
  std::mt19937_64 rng(7);
  for (int i = 0; i < samples; ++i) {
    const Action a = policy.sample(rng);
    algorithm.observe(a, bandit_reward(a), true);
  }
}

/// Expects the policy to pick the optimum's device at every position with probability > 0.9.
inline void expect_learned(const TabularPolicy& policy) {
  for (int pos = 0; pos < 3; ++pos)
    EXPECT_GT(policy.probs(pos)[kBest[pos]], 0.9) << "position " << pos;
}

}  // namespace placement::testing
