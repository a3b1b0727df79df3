#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "live/session.h"

namespace placementd {
namespace {

TEST(CandidateRecord, MedianOfTheMeasuredSteps) {
  CandidateRecord c;
  EXPECT_FALSE(c.median());
  c.step_times = {3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(*c.median(), 2.0);
  c.step_times.push_back(4.0);
  EXPECT_DOUBLE_EQ(*c.median(), 2.5);
}

TEST(CandidateRecord, KeepsTheLatestStepsOfALongJobMeasuredOrProfiled) {
  // A job reports what it likes, for as long as it likes: what the session keeps stays bounded.
  CandidateRecord c;
  for (size_t i = 0; i < 5 * CandidateRecord::kKeptSteps; ++i) {
    c.record(1.0 + static_cast<double>(i));
    c.record_profiled(2.0 + static_cast<double>(i));
  }
  EXPECT_LE(c.step_times.size(), 2 * CandidateRecord::kKeptSteps);
  EXPECT_LE(c.profiled_times.size(), 2 * CandidateRecord::kKeptSteps);
  EXPECT_GE(c.profiled_times.size(), CandidateRecord::kKeptSteps);
  EXPECT_DOUBLE_EQ(c.profiled_times.back(),
                   2.0 + static_cast<double>(5 * CandidateRecord::kKeptSteps - 1));
  EXPECT_EQ(c.measured_steps, 5 * CandidateRecord::kKeptSteps);
}

TEST(CandidateRecord, MedianIntervalTakesTheBinomialRanksAroundTheMedian) {
  CandidateRecord c;
  c.step_times = {1.0, 2.0, 3.0, 4.0, 5.0};
  EXPECT_FALSE(c.median_interval());  // 5 steps: [min, max] covers only 94%
  c.step_times.push_back(6.0);
  // 6 steps: [min, max] covers 1 - 2/64 = 96.9%.
  EXPECT_EQ(c.median_interval(), (std::array<double, 2>{1.0, 6.0}));
  // 10 steps: [x(2), x(9)] covers 97.9%, [x(3), x(8)] only 89%.
  c.step_times = {10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0};
  EXPECT_EQ(c.median_interval(), (std::array<double, 2>{2.0, 9.0}));
  // 100 steps: ranks 40 and 61 (the textbook n/2 -+ 1.96 sqrt(n)/2, rounded outwards).
  c.step_times.clear();
  for (int i = 1; i <= 100; ++i) c.step_times.push_back(i);
  EXPECT_EQ(c.median_interval(), (std::array<double, 2>{40.0, 61.0}));
}

TEST(CandidateRecord, MeanAndItsIntervalAreWhatTheJobsTimeAddsUpFrom) {
  CandidateRecord c;
  EXPECT_FALSE(c.mean());
  c.step_times = {1.0, 1.0, 1.0, 1.0, 1.0};
  EXPECT_DOUBLE_EQ(*c.mean(), 1.0);
  EXPECT_FALSE(c.mean_interval()) << "5 steps: too few";
  c.step_times.push_back(7.0);  // a skewed tail: the median stays 1, the mean does not
  EXPECT_DOUBLE_EQ(*c.median(), 1.0);
  EXPECT_DOUBLE_EQ(*c.mean(), 2.0);
  // sd = sqrt(30 / 5) = 2.449; half-width 1.96 sd / sqrt(6) = 1.96.
  const auto interval = c.mean_interval();
  ASSERT_TRUE(interval);
  EXPECT_NEAR((*interval)[0], 0.04, 1e-12);
  EXPECT_NEAR((*interval)[1], 3.96, 1e-12);
}

TEST(Session, TheTimelineKeepsEveryStepInOrderWithinItsBound) {
  // A long job alternating placements in windows of 10, as trials do: the timeline stays within
  // kMaxPoints, every step is in exactly one point, in order, and the time adds up.
  using placement::messages::TimelinePoint;
  Session s;
  s.incumbent = 1;
  double total = 0;
  const uint64_t steps = 50000;
  for (uint64_t i = 0; i < steps; ++i) {
    const uint64_t placement = (i / 10) % 2 == 0 ? 1 : 2;
    const double t = placement == 1 ? 1.0 + (i % 7) * 0.01 : 2.0;
    if (i == 30000) s.incumbent = 2;  // a trial moved the placement in force
    ++s.steps;
    s.add_to_timeline(placement, t);
    total += t;
  }
  ASSERT_LE(s.timeline.size(), TimelinePoint::kMaxPoints);
  EXPECT_GE(s.timeline.size(), TimelinePoint::kMaxPoints / 2);
  uint64_t next = 0;
  double sum = 0;
  for (const TimelinePoint& p : s.timeline) {
    EXPECT_EQ(p.first_step, next);
    EXPECT_LE(p.steps, s.timeline_stride);
    next += p.steps;
    sum += p.mean_step_time_s * static_cast<double>(p.steps);
  }
  EXPECT_EQ(next, steps);
  EXPECT_NEAR(sum, total, 1e-6 * total);
  EXPECT_EQ(s.timeline.front().placement, 0u) << "windows of both placements merged";
  EXPECT_EQ(s.timeline.front().best, 1u);
  EXPECT_EQ(s.timeline.back().best, 2u);

  // Early on, before any merge, a point is a step and says what ran.
  Session fresh;
  fresh.incumbent = 1;
  for (uint64_t placement : {1, 1, 2}) {
    ++fresh.steps;
    fresh.add_to_timeline(placement, 3.0);
  }
  ASSERT_EQ(fresh.timeline.size(), 3u);
  EXPECT_EQ(fresh.timeline[2].first_step, 2u);
  EXPECT_EQ(fresh.timeline[2].placement, 2u);
  EXPECT_EQ(fresh.timeline[2].best, 1u);
}

TEST(Session, TheBestIsTheIncumbentNotTheLowestMedian) {
  Session s;
  s.candidates[1] = {1, {}, Reason::kStart, {4, 4, 5}, 0};
  s.candidates[2] = {2, {}, Reason::kPolicy, {2, 2}, 0};  // faster over two steps, never on trial
  s.candidates[3] = {3, {}, Reason::kPolicy, {}, 0};      // warm-up only: no median yet
  s.measured_seconds = 5 + 4 + 4 + 5 + 2 + 2 + 1;
  s.exploration_cost_s = 3.0;  // what candidates 2 and 3 took beyond the start's time
  EXPECT_EQ(s.best(), nullptr) << "no incumbent before the start's screening";
  s.incumbent = 1;
  ASSERT_NE(s.best(), nullptr);
  EXPECT_EQ(s.best()->id, 1u);
  auto j = s.summary();
  EXPECT_DOUBLE_EQ(j.start_step_time_s.value(), 4.0);
  EXPECT_DOUBLE_EQ(j.best_step_time_s.value(), 4.0);
  EXPECT_DOUBLE_EQ(j.speedup.value(), 1.0);
  EXPECT_NEAR(j.exploration_overhead, 3.0 / 23.0, 1e-12);
  EXPECT_EQ(j.candidates_tried, 3u);
  s.exploration_cost_s = -1.0;  // faster candidates earned time back
  EXPECT_EQ(s.summary().exploration_overhead, 0.0);
  s.incumbent = 2;  // as after a trial it won
  j = s.summary();
  EXPECT_DOUBLE_EQ(j.best_step_time_s.value(), 2.0);
  EXPECT_DOUBLE_EQ(j.speedup.value(), 2.0);
  s.incumbent = 3;
  EXPECT_EQ(s.best(), nullptr) << "an incumbent without a measurement is no best";
}

TEST(Session, TheTrialOutcomeIsDescribedWithItsInterval) {
  TrialOutcome t;
  t.against = 1;
  t.verdict = TrialVerdict::kFaster;
  t.log_ratio = ShiftInterval{std::log(0.96), std::log(0.94), std::log(0.98)};
  t.pairs = 64;
  EXPECT_EQ(describe(t), "faster than 1: -4.0% (-6.0% to -2.0%), 64 pairs");
  t.verdict = TrialVerdict::kUnclear;
  t.final_check = true;
  t.log_ratio.reset();
  EXPECT_EQ(describe(t),
            "not shown faster than the start 1 (unclear at the cap or the budget's end), 64 pairs");
  t.verdict = TrialVerdict::kFaster;
  t.note = "the start failed a step";
  EXPECT_EQ(describe(t), "faster than the start 1 (the start failed a step), 64 pairs");
}

}  // namespace
}  // namespace placementd
