#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "live/session.h"

namespace placementd {
namespace {

TEST(CandidateRecord, MedianSkipsWarmup) {
  CandidateRecord c;
  c.step_times = {9.0, 9.0, 3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(*c.median(2), 2.0);
  c.step_times.push_back(4.0);
  EXPECT_DOUBLE_EQ(*c.median(2), 2.5);
  EXPECT_FALSE(c.median(6));
  EXPECT_DOUBLE_EQ(*c.median(0), 3.5);
}

TEST(CandidateRecord, MedianIntervalTakesTheBinomialRanksAroundTheMedian) {
  CandidateRecord c;
  c.step_times = {100.0, 1.0, 2.0, 3.0, 4.0, 5.0};  // the first is warmup
  EXPECT_FALSE(c.median_interval(1));                 // 5 steps: [min, max] covers only 94%
  c.step_times.push_back(6.0);
  // 6 steps: [min, max] covers 1 - 2/64 = 96.9%.
  EXPECT_EQ(c.median_interval(1), (std::array<double, 2>{1.0, 6.0}));
  // 10 steps: [x(2), x(9)] covers 97.9%, [x(3), x(8)] only 89%.
  c.step_times = {100.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0};
  EXPECT_EQ(c.median_interval(1), (std::array<double, 2>{2.0, 9.0}));
  // 100 steps: ranks 40 and 61 (the textbook n/2 -+ 1.96 sqrt(n)/2, rounded outwards).
  c.step_times.clear();
  for (int i = 1; i <= 100; ++i) c.step_times.push_back(i);
  EXPECT_EQ(c.median_interval(0), (std::array<double, 2>{40.0, 61.0}));
  EXPECT_FALSE(c.median_interval(100));
}

TEST(Session, BestAndOverheadFollowTheMeasurements) {
  Session s;
  s.policy.exploration.warmup_steps = 1;
  s.candidates[1] = {1, {}, Reason::kStart, {5, 4, 4}, 0};
  s.candidates[2] = {2, {}, Reason::kPolicy, {5, 2, 2}, 0};
  s.candidates[3] = {3, {}, Reason::kPolicy, {1}, 0};  // warm-up only: no median yet
  s.measured_seconds = 5 + 4 + 4 + 5 + 2 + 2 + 1;
  s.exploration_seconds = 5 + 2 + 2 + 1;  // candidates 2 and 3; the start is no overhead
  ASSERT_NE(s.best(), nullptr);
  EXPECT_EQ(s.best()->id, 2u);
  const auto j = s.summary();
  EXPECT_DOUBLE_EQ(j.start_step_time_s.value(), 4.0);
  EXPECT_DOUBLE_EQ(j.best_step_time_s.value(), 2.0);
  EXPECT_DOUBLE_EQ(j.speedup.value(), 2.0);
  EXPECT_NEAR(j.exploration_overhead, 10.0 / 23.0, 1e-12);
  EXPECT_EQ(j.candidates_tried, 3u);
}

TEST(Session, WhileExploitingThePlacementInForceIsTheBest) {
  Session s;
  s.policy.exploration.warmup_steps = 1;
  s.candidates[1] = {1, {}, Reason::kPolicy, std::vector<double>(1000, 2.0), 0};
  s.candidates[2] = {2, {}, Reason::kPolicy, {5, 1.9, 1.9}, 0};  // a hair faster over two steps
  EXPECT_EQ(s.best()->id, 2u);
  s.state = SessionState::kExploiting;
  s.current_candidate = 1;
  EXPECT_EQ(s.best()->id, 1u);
  EXPECT_DOUBLE_EQ(s.summary().best_step_time_s.value(), 2.0);
}

}  // namespace
}  // namespace placementd
