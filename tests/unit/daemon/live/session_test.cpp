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
