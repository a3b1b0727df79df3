#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "live/session.h"
#include "test_session.h"
#include "test_store.h"

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

TEST(Timeline, KeepsEveryStepInOrderWithinItsBound) {
  // A long job alternating placements in windows of 10, as trials do: the timeline stays within
  // kMaxPoints, every step is in exactly one point, in order, and the time adds up.
  using placement::messages::TimelinePoint;
  Timeline timeline;
  double total = 0;
  const uint64_t steps = 50000;
  uint64_t best = 1;
  for (uint64_t i = 0; i < steps; ++i) {
    const uint64_t placement = (i / 10) % 2 == 0 ? 1 : 2;
    const double t = placement == 1 ? 1.0 + (i % 7) * 0.01 : 2.0;
    if (i == 30000) best = 2;  // a trial moved the placement in force
    timeline.add(i, placement, best, t);
    total += t;
  }
  const std::vector<TimelinePoint>& points = timeline.points();
  ASSERT_LE(points.size(), TimelinePoint::kMaxPoints);
  EXPECT_GE(points.size(), TimelinePoint::kMaxPoints / 2);
  uint64_t next = 0;
  double sum = 0;
  for (const TimelinePoint& p : points) {
    EXPECT_EQ(p.first_step, next);
    EXPECT_LE(p.steps, timeline.stride());
    next += p.steps;
    sum += p.mean_step_time_s * static_cast<double>(p.steps);
  }
  EXPECT_EQ(next, steps);
  EXPECT_NEAR(sum, total, 1e-6 * total);
  EXPECT_EQ(points.front().placement, 0u) << "windows of both placements merged";
  EXPECT_EQ(points.front().best, 1u);
  EXPECT_EQ(points.back().best, 2u);

  // Early on, before any merge, a point is a step and says what ran.
  Timeline fresh;
  uint64_t step = 0;
  for (uint64_t placement : {1, 1, 2}) fresh.add(step++, placement, 1, 3.0);
  ASSERT_EQ(fresh.points().size(), 3u);
  EXPECT_EQ(fresh.points()[2].first_step, 2u);
  EXPECT_EQ(fresh.points()[2].placement, 2u);
  EXPECT_EQ(fresh.points()[2].best, 1u);
}

TEST(Session, TheBestIsTheIncumbentNotTheLowestMedian) {
  testing::TestStore store("session_test");
  testing::SessionSetup setup;
  setup.exploration.warmup_steps = 0;
  setup.exploration.steps_per_candidate = 3;
  setup.exploration.max_overhead_fraction = 1.0;
  const auto s = testing::make_test_session(std::move(setup), *store);
  EXPECT_EQ(s->best(), nullptr) << "nothing measured yet";
  const placement::messages::Directive start = s->start();
  EXPECT_EQ(s->best(), nullptr) << "no incumbent before the start's screening";
  for (double t : {4.0, 4.0}) EXPECT_FALSE(s->record({start.placement_id, 0, t, true, ""}));
  ASSERT_NE(s->best(), nullptr) << "the start is in force from its first step";
  ASSERT_TRUE(s->record({start.placement_id, 0, 5.0, true, ""}));
  const auto next = s->advance(*store);
  ASSERT_TRUE(next);
  ASSERT_NE(s->best(), nullptr);
  EXPECT_EQ(s->best()->id, start.placement_id);
  // The next candidate runs faster over two steps, and never goes on trial.
  for (double t : {2.0, 2.0}) EXPECT_FALSE(s->record({next->placement_id, 0, t, true, ""}));
  EXPECT_EQ(*s->candidates().at(next->placement_id).median(), 2.0);
  EXPECT_EQ(s->best()->id, start.placement_id) << "only a trial unseats the incumbent";
  const auto j = s->summary();
  EXPECT_DOUBLE_EQ(j.start_step_time_s.value(), 4.0);
  EXPECT_DOUBLE_EQ(j.best_step_time_s.value(), 4.0);
  EXPECT_DOUBLE_EQ(j.speedup.value(), 1.0);
  EXPECT_DOUBLE_EQ(j.job_s, 4 + 4 + 5 + 2 + 2);
  EXPECT_EQ(j.candidates_tried, 2u);
  EXPECT_EQ(j.exploration_overhead, 0.0) << "a faster candidate earned time back";
  EXPECT_DOUBLE_EQ(s->counters().exploration_cost_s, 2 * (2.0 - 13.0 / 3.0));
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
  t = TrialOutcome{};
  t.against = 2;
  t.verdict = TrialVerdict::kFasterByEstimate;
  t.refinement = true;
  t.log_ratio = ShiftInterval{std::log(0.997), std::log(0.99), std::log(1.004)};
  t.pairs = 500;
  EXPECT_EQ(
      describe(t),
      "faster by its estimate than 2 in a long trial (unclear at the cap or the budget's end; "
      "taken for its estimate's side): -0.3% (-1.0% to +0.4%), 500 pairs");
}

}  // namespace
}  // namespace placementd
