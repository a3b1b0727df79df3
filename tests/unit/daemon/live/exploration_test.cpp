#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "live/exploration.h"
#include "plugin_doubles.h"
#include "plugins/plugin_registry.h"
#include "test_graphs.h"
#include "test_session.h"
#include "test_store.h"

namespace placementd {
namespace {

using placement::Placement;
using placement::testing::OneGroupPerOp;
using placement::testing::RecordingAlgorithm;
using placement::testing::TabularPlacer;
using testing::SessionSetup;

class Exploration : public ::testing::Test {
 protected:
  // The session of `setup` as a test left it (by default four ops in a chain, one group each, two
  // devices of 1 GiB), over a RecordingAlgorithm unless `algorithm` is given; what the store holds
  // for it is found as a job's would be.
  void make_session(std::unique_ptr<placement::Algorithm> algorithm = nullptr) {
    if (algorithm) setup.algorithm = std::move(algorithm);
    if (!setup.algorithm) {
      auto recording = std::make_unique<RecordingAlgorithm>();
      recording_ = recording.get();
      setup.algorithm = std::move(recording);
    } else {
      recording_ = dynamic_cast<RecordingAlgorithm*>(setup.algorithm.get());
    }
    session_ = testing::make_test_session(std::move(setup), *store);
    s = session_.get();
    setup = defaults();
  }
  static SessionSetup defaults() {
    SessionSetup d;
    // The id seeds the session's random numbers: these tests' samples are the default seed's.
    d.id = std::mt19937_64::default_seed;
    d.exploration.steps_per_candidate = 4;
    d.exploration.warmup_steps = 1;
    d.exploration.max_candidates = 10;
    d.exploration.converge_candidates = 0;
    d.exploration.drift_steps = 3;
    d.exploration.max_overhead_fraction = 1.0;  // no pacing, unless a test sets one
    d.exploration.trial_window_steps = 2;       // a noiseless job decides at 8 pairs
    return d;
  }
  RecordingAlgorithm& recorder() { return *recording_; }

  // The "job": an op on device 1 runs in 1 time unit, on device 0 in 2 (so all-on-1 is best),
  // scaled by `slowdown`; the first step after a swap is three times slower. Runs steps under `d`
  // (advancing the session whenever it asks) until the session moves the job elsewhere.
  std::optional<Directive> run_candidate(const Directive& d, double slowdown = 1.0,
                                         uint64_t max_steps = 10000) {
    for (uint64_t i = 0; i < max_steps; ++i) {
      double t = 0;
      for (int dev : d.placement.device_of_op) t += dev == 1 ? 1.0 : 2.0;
      if (s->record({d.placement_id, step++, t * slowdown * (i == 0 ? 3.0 : 1.0), true, ""}))
        if (auto next = s->advance(*store)) return next;
    }
    ADD_FAILURE() << "the session never moved the job";
    return std::nullopt;
  }
  // Runs the job until the session issues a placement it has not run before (past any trial).
  std::optional<Directive> run_to_next_candidate(const Directive& d) {
    const uint64_t last = s->candidates().rbegin()->first;
    std::optional<Directive> next = run_candidate(d);
    while (next && next->placement_id <= last) next = run_candidate(*next);
    return next;
  }
  // Runs the job under the session's directives, with step times from `time_of`, until it exploits;
  // returns the directive that said so.
  Directive run_world(Directive d, const std::function<double(const Directive&)>& time_of) {
    for (int i = 0; i < 100000 && s->state() != SessionState::kExploiting; ++i)
      if (s->record({d.placement_id, step++, time_of(d), true, ""}))
        if (auto next = s->advance(*store)) d = *next;
    EXPECT_EQ(s->state(), SessionState::kExploiting);
    return d;
  }
  static double units(const Placement& p) {
    double t = 0;
    for (int dev : p.device_of_op) t += dev == 1 ? 1.0 : 2.0;
    return t;
  }
  // Runs the job until the session exploits; returns the directive that said so.
  std::optional<Directive> run_until_exploiting(std::optional<Directive> d, double slowdown = 1.0) {
    while (d && s->state() != SessionState::kExploiting) d = run_candidate(*d, slowdown);
    return d;
  }

  // From `d`, the directive that exploits: drifts (drift_steps steps 30% slower after the drift
  // reference's steady ones), then runs re-exploration to its end with every step `slowdown` times
  // its time; returns what re-exploration issued.
  std::vector<Directive> drift_and_reexplore(std::optional<Directive> d, double slowdown) {
    EXPECT_TRUE(d);
    if (!d) return {};
    const double best_time = *s->best()->median();
    for (int i = 0; i < 40; ++i) s->record({d->placement_id, step++, best_time, true, ""});
    bool drifted = false;
    for (int i = 0; i < 3; ++i)
      drifted = s->record({d->placement_id, step++, best_time * 1.3, true, ""});
    EXPECT_TRUE(drifted);
    std::vector<Directive> issued;
    for (d = s->advance(*store); d; d = run_candidate(*d, slowdown)) {
      issued.push_back(*d);
      if (s->state() == SessionState::kExploiting) break;
    }
    EXPECT_EQ(s->state(), SessionState::kExploiting);
    return issued;
  }
  // Whether the job ran `p` in a trial against the start that passed (its final check, or its own
  // trial standing for one).
  bool passed_against_the_start(const Placement& p) const {
    for (const auto& [id, c] : s->candidates())
      if (c.trial && (c.trial->final_check || c.trial->stands_for_final_check) &&
          c.trial->verdict == TrialVerdict::kFaster && c.placement.device_of_op == p.device_of_op)
        return true;
    return false;
  }

  testing::TestStore store{"exploration_test"};
  // What the next make_session() builds: a test changes it first.
  SessionSetup setup = defaults();
  std::unique_ptr<Session> session_;
  Session* s = nullptr;
  RecordingAlgorithm* recording_ = nullptr;
  uint64_t step = 0;
};

TEST_F(Exploration, ProfilesTheJobsOwnPlacementFirstThenSamplesThePolicy) {
  make_session();
  const Directive first = s->start();
  EXPECT_EQ(first.reason, Reason::kStart);
  EXPECT_EQ(first.placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(s->state(), SessionState::kProfiling);
  // k - 1 good steps: nothing to decide yet.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(s->record({first.placement_id, step++, 8.0, true, ""}));
  ASSERT_TRUE(s->record({first.placement_id, step++, 8.0, true, ""}));
  EXPECT_FALSE(s->record({first.placement_id, step++, 8.0, true, ""})) << "one advance at a time";
  const auto next = s->advance(*store);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->reason, Reason::kPolicy);
  EXPECT_EQ(s->state(), SessionState::kExploring);
  EXPECT_TRUE(recorder().observations.empty()) << "the start placement is no sample of the policy";
  // The start is now the stored best for this graph and device set.
  const auto stored = store->best(0, *s->graph(), s->devices());
  ASSERT_TRUE(stored);
  EXPECT_DOUBLE_EQ(stored->step_time_s, 8.0);
}

TEST_F(Exploration, EveryDirectiveCarriesTheSessionsStateAndTheStepThatDecidedIt) {
  make_session();
  const Directive first = s->start();
  EXPECT_EQ(first.state, SessionState::kProfiling);
  EXPECT_FALSE(first.after_step) << "no report decided the first placement";
  EXPECT_FALSE(first.profile) << "a job that does not profile is never asked to";
  EXPECT_EQ(first.placement, s->candidates().at(first.placement_id).placement);
  uint64_t due_at = 0;
  for (int i = 0; i < 10; ++i) {
    due_at = step;
    if (s->record({first.placement_id, step++, 8.0, true, ""})) break;
  }
  ASSERT_EQ(s->advance_due_after(), due_at);
  const auto next = s->advance(*store);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->after_step, due_at);
  EXPECT_EQ(next->state, SessionState::kExploring) << "the state it decided, not the one before";
  EXPECT_EQ(next->placement, s->candidates().at(next->placement_id).placement);
  EXPECT_FALSE(s->advance_due_after()) << "the advance ran";

  // A plugin failure moves the job with the same fields, naming the step that was due.
  const std::optional<Directive> screened = run_to_next_candidate(*next);
  ASSERT_TRUE(screened);
  for (int i = 0; i < 10 && !s->advance_due_after(); ++i)
    s->record({screened->placement_id, step++, 100.0, true, ""});
  ASSERT_TRUE(s->advance_due_after());
  const uint64_t due = *s->advance_due_after();
  const auto back = s->stop_exploring("placer: threw");
  ASSERT_TRUE(back) << "the job leaves the candidate for the placement in force";
  EXPECT_EQ(back->after_step, due);
  EXPECT_EQ(back->state, SessionState::kExploiting);
  EXPECT_EQ(back->reason, Reason::kBest);
  EXPECT_NE(back->placement_id, screened->placement_id);
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_FALSE(s->advance_due_after());
}

TEST_F(Exploration, TheSummaryTellsWhatTheJobGotNotJustTheBestAgainstTheStart) {
  // Issue #43: a job that ended while exploring was told "1.10x at 0% overhead". The summary now
  // says what the job's own time was against the start's, and what the steps off the best cost;
  // the test keeps its own books of the steps it ran.
  setup.exploration.max_candidates = 4;
  make_session();
  Directive d = s->start();
  std::map<uint64_t, std::pair<double, uint64_t>> ran;  // time and steps per placement
  double total = 0;
  uint64_t last = 0;
  auto run = [&](int steps) {
    for (int i = 0; i < steps && s->state() != SessionState::kExploiting; ++i) {
      const double t = units(d.placement) * (d.placement_id != last ? 3.0 : 1.0);  // warm-up
      last = d.placement_id;
      total += t;
      ran[d.placement_id].first += t;
      ++ran[d.placement_id].second;
      if (s->record({d.placement_id, step++, t, true, ""}))
        if (auto next = s->advance(*store)) d = *next;
    }
  };
  auto beyond_best = [&] {
    double beyond = 0;
    const double best = *s->best()->mean();
    for (const auto& [id, r] : ran)
      if (id != s->incumbent()) beyond += r.first - static_cast<double>(r.second) * best;
    return beyond;
  };
  run(30);
  ASSERT_EQ(s->state(), SessionState::kExploring) << "still exploring after 30 steps";
  auto j = s->summary();
  EXPECT_DOUBLE_EQ(j.job_s, total);
  ASSERT_TRUE(j.realized_speedup && j.realized_speedup_interval);
  EXPECT_DOUBLE_EQ(*j.start_mean_step_time_s, 8.0);  // all on device 0: 8 units a step
  EXPECT_DOUBLE_EQ(*j.realized_speedup, 8.0 * 30 / total);
  EXPECT_LE((*j.realized_speedup_interval)[0], *j.realized_speedup);
  EXPECT_GE((*j.realized_speedup_interval)[1], *j.realized_speedup);
  ASSERT_TRUE(j.beyond_best_s);
  EXPECT_DOUBLE_EQ(*j.beyond_best_s, beyond_best());
  EXPECT_FALSE(j.exploration_finished);
  EXPECT_EQ(j.current_placement, d.placement_id);

  run(100000);
  ASSERT_EQ(s->state(), SessionState::kExploiting);
  j = s->summary();
  EXPECT_TRUE(j.exploration_finished);
  EXPECT_TRUE(j.on_best);
  EXPECT_EQ(j.current_placement, j.best_placement);
  EXPECT_LT(*j.best_step_time_s, 8.0) << "a faster placement than the start won its trials";
  EXPECT_DOUBLE_EQ(*j.beyond_best_s, beyond_best());
  EXPECT_GT(*j.beyond_best_s, 0.0) << "the start and the slower candidates took longer than it";
  EXPECT_DOUBLE_EQ(*j.realized_speedup, 8.0 * static_cast<double>(s->counters().steps) / total);
  EXPECT_LT(*j.realized_speedup, *j.speedup) << "what the job got lags what the best gains a step";
  // The timeline holds every step, and its placement in force changes only where a trial ended.
  std::set<uint64_t> decided;
  for (const auto& mark : s->timeline().marks()) decided.insert(mark.step);
  ASSERT_FALSE(decided.empty());
  ASSERT_EQ(s->timeline().points().back().first_step + s->timeline().points().back().steps,
            s->counters().steps);
  for (size_t i = 1; i < s->timeline().points().size(); ++i) {
    EXPECT_EQ(s->timeline().points()[i].first_step,
              s->timeline().points()[i - 1].first_step + s->timeline().points()[i - 1].steps);
    if (s->timeline().points()[i].best != s->timeline().points()[i - 1].best) {
      EXPECT_TRUE(decided.count(s->timeline().points()[i].first_step))
          << "step " << s->timeline().points()[i].first_step << ": "
          << s->timeline().points()[i - 1].best << " -> " << s->timeline().points()[i].best
          << ", decided at " << ::testing::PrintToString(decided);
    }
  }
  // What the summary says of a job that detached keeps how it ended.
  s->detach();
  EXPECT_TRUE(s->summary().exploration_finished);
}

TEST_F(Exploration, AJobTooShortForItsExplorationIsToldAtAttach) {
  ExplorationConfig e;  // 30 candidates to converge, 5 + 15 steps each
  EXPECT_FALSE(short_job_notice(e, 0)) << "a job of unknown length is paced instead";
  EXPECT_FALSE(short_job_notice(e, 620));
  const auto notice = short_job_notice(e, 619);
  ASSERT_TRUE(notice);
  EXPECT_NE(notice->find("at least 620 steps"), std::string::npos) << *notice;
  EXPECT_NE(notice->find("expects 619"), std::string::npos) << *notice;
  e.converge_candidates = 0;  // then only max_candidates ends it
  EXPECT_TRUE(short_job_notice(e, 2000));
  EXPECT_FALSE(short_job_notice(e, 101 * 20));
}

TEST_F(Exploration, ProfiledStepsCountAsStepsButAreNoMeasurement) {
  make_session();
  const Directive first = s->start();
  // Three steps under the job's profiler, slowed by it: not part of the median.
  for (int i = 0; i < 3; ++i) {
    placement::messages::StepReport m{first.placement_id, step++, 80.0, true, ""};
    m.profiled = true;
    EXPECT_FALSE(s->record(m));
  }
  EXPECT_EQ(s->counters().steps, 3u);
  EXPECT_EQ(s->counters().profiled_steps, 3u);
  EXPECT_TRUE(s->candidates().at(first.placement_id).step_times.empty());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(s->record({first.placement_id, step++, 8.0, true, ""}));
  ASSERT_TRUE(s->record({first.placement_id, step++, 8.0, true, ""}));
  EXPECT_EQ(*s->candidates().at(first.placement_id).median(), 8.0);
  // What the profiler cost beyond the start's own 8 per step is overhead: 3 × (80 − 8) of 272.
  EXPECT_DOUBLE_EQ(s->profiling_overhead_seconds(), 216.0);
  EXPECT_DOUBLE_EQ(s->summary().exploration_overhead, 216.0 / 272.0);
}

TEST_F(Exploration, AllOnOneDeviceIsTriedRightAfterAStartThatSplits) {
  setup.start = Placement{{0, 1, 0, 1}};
  make_session();
  const auto second = run_candidate(s->start());
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, Reason::kSingleDevice);
  EXPECT_EQ(second->placement.device_of_op, (std::vector<int>{0, 0, 0, 0}));
  const auto third = run_candidate(*second);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->reason, Reason::kPolicy);
  EXPECT_TRUE(recorder().observations.empty()) << "neither is a sample of the policy";
}

TEST_F(Exploration, AWarmStartsPlacementIsItsFirstCandidateAndScoredAsItsAction) {
  make_session();
  offline::ImitationResult warm;
  warm.baseline = "simulator";
  warm.action = {1, 1, 0, 1};
  warm.placement = Placement{{1, 1, 0, 1}};
  s->warm_started(warm);
  const auto second = run_candidate(s->start());  // start all on 0: single device is that
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, Reason::kWarmStart);
  EXPECT_EQ(second->placement.device_of_op, (std::vector<int>{1, 1, 0, 1}));
  const auto third = run_to_next_candidate(*second);  // after its trial against the start
  ASSERT_TRUE(third);
  EXPECT_EQ(third->reason, Reason::kPolicy);
  ASSERT_EQ(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].action, warm.action);
  EXPECT_DOUBLE_EQ(recorder().observations[0].reward, -std::sqrt(5.0))
      << "median of 1+1+2+1 time units";
}

TEST_F(Exploration, ASkippedWarmStartOffersNothing) {
  make_session();
  offline::ImitationResult warm;
  warm.baseline = "simulator";
  warm.skipped = "simulator search: the graph has no profile";
  s->warm_started(warm);
  const auto next = run_candidate(s->start());
  ASSERT_TRUE(next);
  EXPECT_EQ(next->reason, Reason::kPolicy);
}

TEST_F(Exploration, AllOnOneDeviceIsNotOfferedWhenItDoesNotFit) {
  setup.start = Placement{{0, 1, 0, 1}};
  setup.devices = placement::testing::devices(2, placement::DeviceKind::kCpu, 1 << 20);
  for (auto& op : setup.graph.ops) op.parameter_bytes = 100 << 10;
  make_session();
  ASSERT_FALSE(s->memory_model()->check_memory(Placement::single(*s->graph(), 0)).valid)
      << "premise: one device is too small";
  ASSERT_TRUE(s->memory_model()->check_memory(Placement{{0, 1, 0, 1}}).valid)
      << "premise: the split fits";
  const auto next = run_candidate(s->start());
  ASSERT_TRUE(next);
  EXPECT_NE(next->reason, Reason::kSingleDevice);
  for (const auto& [id, c] : s->candidates()) EXPECT_NE(c.reason, Reason::kSingleDevice);
}

TEST_F(Exploration, RewardIsMinusRootOfTheMedianAfterWarmup) {
  make_session();
  const auto second = run_candidate(s->start());
  ASSERT_TRUE(second);
  const std::vector<double> times = {50.0, 4.0, 9.0, 1.0};  // the first is warm-up
  for (double t : times) s->record({second->placement_id, step++, t, true, ""});
  s->advance(*store);  // a median of 4 against the start's 8: on trial next
  // The first observation is the finished candidate's (later ones score repeated samples).
  ASSERT_GE(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].action, second->placement.device_of_op);
  EXPECT_DOUBLE_EQ(recorder().observations[0].reward, -std::sqrt(4.0));
  EXPECT_TRUE(recorder().observations[0].valid);
}

TEST_F(Exploration, AFailedStepEndsTheCandidateWithTheFailingReward) {
  make_session();
  const auto second = run_candidate(s->start());
  ASSERT_TRUE(second);
  ASSERT_TRUE(s->record({second->placement_id, step++, 0.5, false, "out of memory"}));
  const auto third = s->advance(*store);
  ASSERT_TRUE(third);
  EXPECT_NE(third->placement_id, second->placement_id);
  ASSERT_GE(recorder().observations.size(), 1u);
  EXPECT_EQ(recorder().observations[0].reward, s->policy().exploration.failing_reward);
  EXPECT_FALSE(recorder().observations[0].valid);
  EXPECT_EQ(s->counters().failed_steps, 1u);
  EXPECT_EQ(s->best()->id, 1u) << "a failed candidate is never the best";
}

TEST_F(Exploration, CandidatesTheMemoryModelRejectsNeverRun) {
  // 4 ops of 1 KiB output each and a device 1 too small for any of them: every sample that uses
  // device 1 is rejected before it runs.
  setup.devices.devices[1].memory_bytes = 512;
  make_session();
  std::optional<Directive> d = s->start();
  for (int i = 0; i < 20 && d && s->state() != SessionState::kExploiting; ++i) {
    for (int dev : d->placement.device_of_op) ASSERT_EQ(dev, 0) << "a rejected candidate was sent";
    d = run_candidate(*d);
  }
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_GT(s->counters().rejected, 0u);
  EXPECT_EQ(s->counters().rejected_by_device.at("cpu:1"), s->counters().rejected);
  size_t invalid = 0;
  for (const auto& o : recorder().observations) invalid += o.valid ? 0 : 1;
  EXPECT_EQ(invalid, s->counters().rejected) << "each rejection is a failing-reward sample";
}

TEST_F(Exploration, ExploitsTheBestAfterTheBudgetAndReexploresOnDrift) {
  make_session();
  std::optional<Directive> d = run_until_exploiting(s->start());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_LE(static_cast<int64_t>(s->candidates().size()), s->policy().exploration.max_candidates);
  const CandidateRecord* best = s->best();
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(d->placement_id, best->id);
  for (const auto& [id, c] : s->candidates())
    if (auto m = c.median()) {
      EXPECT_GE(*m, *best->median());
    }
  EXPECT_LE(*best->median(), 8.0) << "never worse than the start";

  // Steady step times on the best: no directive. The first 30 (after the swap's warm-up) are the
  // reference a drift is measured from.
  const double best_time = *best->median();
  const uint64_t best_id = best->id;
  for (int i = 0; i < 40; ++i)
    EXPECT_FALSE(s->record({d->placement_id, step++, best_time, true, ""}));
  EXPECT_EQ(s->drift_reference(), best_time);
  // 30% slower for drift_steps steps: re-measure the best, then a few new samples.
  for (int i = 0; i < 2; ++i)
    EXPECT_FALSE(s->record({d->placement_id, step++, best_time * 1.3, true, ""}));
  ASSERT_TRUE(s->record({d->placement_id, step++, best_time * 1.3, true, ""}));
  d = s->advance(*store);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kRemeasure);
  EXPECT_EQ(s->state(), SessionState::kReexploring);
  EXPECT_EQ(s->counters().reexplorations, 1u);
  ASSERT_NE(s->best(), nullptr);
  EXPECT_EQ(s->best()->id, best_id)
      << "the placement in force stays the best until its re-measurement";
  EXPECT_TRUE(s->best()->stale) << "what was measured before the drift is stale";
  int reexplored = 0;
  while (d && s->state() == SessionState::kReexploring) {
    reexplored += d->reason == Reason::kReexplore ? 1 : 0;
    d = run_candidate(*d, 1.3);
  }
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_GT(reexplored, 0);
  EXPECT_LE(reexplored, 3);
}

TEST_F(Exploration, ADriftsRemeasurementNoSlowerThanWhenItBeatTheStartSkipsTheFinalCheck) {
  // A transient drift: the best measured afresh runs as fast as before. It beat the start once,
  // so re-exploration ends on it without the start's slow steps again.
  make_session();
  const Directive first = s->start();
  const std::optional<Directive> exploiting = run_until_exploiting(first);
  const Placement best = s->best()->placement;
  ASSERT_TRUE(passed_against_the_start(best)) << "the premise: it beat the start";
  const std::optional<uint64_t> converged = s->summary().steps_to_within_2pct;
  ASSERT_TRUE(converged);
  const uint64_t start_id = first.placement_id;
  const std::vector<Directive> issued = drift_and_reexplore(exploiting, 1.0);
  ASSERT_FALSE(issued.empty());
  EXPECT_EQ(issued.front().reason, Reason::kRemeasure);
  for (const Directive& d : issued) EXPECT_NE(d.placement_id, start_id) << "no final check";
  EXPECT_EQ(s->best()->reason, Reason::kRemeasure);
  EXPECT_EQ(s->best()->placement.device_of_op, best.device_of_op);
  EXPECT_EQ(s->summary().steps_to_within_2pct, converged)
      << "the search found the best placement before the drift, whatever its record says now";
}

TEST_F(Exploration, ADriftsRemeasurementSlowerThanWhenItBeatTheStartGoesThroughTheFinalCheck) {
  // The drift stays: the best runs 30% slower than when it won, and the start may have gained on
  // it, so the final check runs again.
  make_session();
  const Directive first = s->start();
  const uint64_t start_id = first.placement_id;
  const std::vector<Directive> issued = drift_and_reexplore(run_until_exploiting(first), 1.3);
  ASSERT_FALSE(issued.empty());
  EXPECT_EQ(issued.front().reason, Reason::kRemeasure);
  EXPECT_TRUE(std::any_of(issued.begin(), issued.end(), [&](const Directive& d) {
    return d.placement_id == start_id;
  })) << "the final check runs the start";
  EXPECT_EQ(s->best()->reason, Reason::kRemeasure);
  EXPECT_TRUE(passed_against_the_start(s->best()->placement));
}

TEST_F(Exploration, ExpectedStepsBoundWhatExplorationCosts) {
  setup.exploration.max_candidates = 1000;
  setup.exploration.max_overhead_fraction = 0.05;
  setup.expected_steps = 1000;  // 5%: the time of 50 steps of the placement in force, 200 units
  setup.start = Placement{{1, 1, 1, 1}};
  make_session();
  // All on device 1 (4 units a step) is the fastest: a candidate costs what its steps take beyond
  // 4 units, its first (warm-up) step three times slower included.
  std::optional<Directive> d = s->start();
  double cost = 0.0;
  uint64_t previous = 0;
  for (int i = 0; i < 100000 && s->state() != SessionState::kExploiting; ++i) {
    const double t = units(d->placement) * (d->placement_id != previous ? 3.0 : 1.0);
    previous = d->placement_id;
    if (s->state() == SessionState::kExploring && d->placement_id != s->incumbent())
      cost += t - 4.0;
    if (s->record({d->placement_id, step++, t, true, ""}))
      if (auto next = s->advance(*store)) d = next;
  }
  ASSERT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_DOUBLE_EQ(s->counters().exploration_cost_s, cost);
  EXPECT_GE(s->counters().exploration_cost_s, 200.0);
  EXPECT_LT(s->counters().exploration_cost_s, 200.0 + (3 * 8 - 4) + 3 * (8 - 4))
      << "past the budget by one candidate at most";
  EXPECT_EQ(s->summary().budget_used, 1.0);
}

TEST_F(Exploration, CandidatesAsFastAsThePlacementInForceCostNothing) {
  setup.exploration.max_candidates = 6;
  setup.exploration.max_overhead_fraction = 0.01;
  setup.expected_steps = 1000;  // 10 steps' time: two screenings, were steps what the budget counts
  make_session();
  run_world(s->start(), [](const Directive&) { return 5.0; });  // every placement alike
  EXPECT_EQ(s->candidates().size(), 6u) << "max_candidates ended exploration, not the budget";
  EXPECT_EQ(s->counters().exploration_cost_s, 0.0);
  EXPECT_GT(s->counters().exploration_steps, 10u);
  EXPECT_EQ(s->summary().exploration_overhead, 0.0);
}

TEST_F(Exploration, WithoutExpectedStepsExplorationIsPacedByTheJobsTime) {
  const double pace = 0.1;
  setup.exploration.max_candidates = 1000;
  setup.exploration.max_overhead_fraction = pace;
  setup.start = Placement{{1, 1, 1, 1}};
  make_session();
  // Starting on the fastest placement, no candidate screens well enough for a trial: this is
  // about the pace of screenings (a trial runs to its verdict, bounded by max_trial_steps).
  std::optional<Directive> d = run_until_exploiting(s->start());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_TRUE(s->paused());
  EXPECT_TRUE(s->summary().paused);
  EXPECT_GE(s->candidates().size(), 3u) << "the first candidates always run";
  EXPECT_GT(s->counters().exploration_cost_s, pace * s->counters().measured_seconds);

  for (int cycle = 0; cycle < 2; ++cycle) {
    // The job trains on the best; exploration resumes once its share is down to half the budget.
    const double best_time = *s->best()->median();
    for (int guard = 0; !s->record({d->placement_id, step++, best_time, true, ""}); ++guard)
      ASSERT_LT(guard, 100000) << "never resumed";
    EXPECT_LE(s->counters().exploration_cost_s, pace / 2 * s->counters().measured_seconds);
    EXPECT_GT(s->counters().exploration_cost_s,
              pace / 2 * (s->counters().measured_seconds - best_time))
        << "resumes at the first chance";
    d = s->advance(*store);
    ASSERT_TRUE(d);
    EXPECT_EQ(s->state(), SessionState::kExploring);
    EXPECT_FALSE(s->paused());
    EXPECT_EQ(d->reason, Reason::kPolicy);
    // New candidates until the pace is exceeded again, by at most the last candidate's time.
    const size_t before = s->candidates().size();
    double last_candidate = 0;
    while (d && s->state() != SessionState::kExploiting) {
      const double explored = s->counters().exploration_cost_s;
      d = run_candidate(*d);
      last_candidate = s->counters().exploration_cost_s - explored;
    }
    ASSERT_TRUE(d);
    EXPECT_TRUE(s->paused()) << "cycle " << cycle;
    EXPECT_GT(s->candidates().size(), before);
    EXPECT_GT(s->counters().exploration_cost_s, pace * s->counters().measured_seconds);
    EXPECT_LE(s->counters().exploration_cost_s - last_candidate,
              pace * (s->counters().measured_seconds - last_candidate));
  }
}

TEST_F(Exploration, StopsEarlyWhenCandidatesStopImproving) {
  setup.exploration.max_candidates = 1000;
  setup.exploration.converge_candidates = 3;
  make_session();
  std::optional<Directive> d = run_until_exploiting(s->start());
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_LT(s->candidates().size(), 1000u);
  EXPECT_GE(s->since_improvement(), 3);
}

TEST_F(Exploration, RepeatedSamplesAreScoredFromTheirMeasurementNotRunAgain) {
  setup.exploration.max_candidates = 1000;
  auto placer = std::make_unique<TabularPlacer>();
  TabularPlacer* tabular = placer.get();
  setup.placer = std::move(placer);
  make_session();
  // A policy certain of one placement: after it ran once, every further sample is a repeat.
  for (auto& row : tabular->table->logits) row = {-50.0, 50.0};
  std::optional<Directive> d = s->start();
  d = run_candidate(*d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  d = run_until_exploiting(d);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, Reason::kBest);
  EXPECT_EQ(d->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(s->candidates().size(), 2u);
  EXPECT_GT(s->counters().repeats_scored, 0u);
  EXPECT_DOUBLE_EQ(recorder().observations.back().reward, -std::sqrt(4.0));
}

TEST_F(Exploration, ARealAlgorithmFindsTheFastestPlacement) {
  PluginRegistry registry;
  registry.scan({PLUGIN_DIR});
  setup.exploration.max_candidates = 200;
  make_session(registry.create_algorithm("reinforce", {}));
  std::optional<Directive> d = run_until_exploiting(s->start());
  ASSERT_NE(s->best(), nullptr);
  EXPECT_EQ(s->best()->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(*s->best()->median(), 4.0);
  EXPECT_DOUBLE_EQ(s->summary().speedup.value(), 2.0);
  // The search got within 2% when the first all-on-cpu:1 candidate finished measuring.
  uint64_t first_optimal_step = 0;
  for (const auto& [id, c] : s->candidates())
    if (c.placement.device_of_op == std::vector<int>{1, 1, 1, 1}) {
      first_optimal_step = *c.measured_at_step;
      break;
    }
  EXPECT_EQ(s->summary().steps_to_within_2pct.value(), first_optimal_step);
}

TEST_F(Exploration, TheNextSessionTriesThePersistedBestFirstAndKeepsItOnlyOnceATrialShowsItFaster) {
  make_session();
  run_until_exploiting(s->start());
  s->persist_best(*store);
  s->persist_policy(*store);
  const Placement best = s->best()->placement;
  EXPECT_TRUE(store->policy_state(0, *s->graph(), s->devices(), s->policy_key()));
  EXPECT_FALSE(store->best(1000, *s->graph(), s->devices()))
      << "uid 1000's jobs do not see uid 0's";

  // The next run of the job (its session finds what the store holds, as a job's does).
  step = 0;
  make_session();
  const Directive first = s->start();
  EXPECT_EQ(first.reason, Reason::kStart);
  EXPECT_EQ(first.placement.device_of_op, (std::vector<int>{0, 0, 0, 0})) << "the job's own";
  const std::optional<Directive> second = run_candidate(first);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reason, Reason::kCached);
  EXPECT_EQ(second->placement.device_of_op, best.device_of_op);
  // It screens faster and goes on trial against the start; only the trial's verdict keeps it.
  run_until_exploiting(second);
  const CandidateRecord& cached = s->candidates().at(second->placement_id);
  ASSERT_TRUE(cached.trial);
  EXPECT_EQ(cached.trial->against, first.placement_id);
  EXPECT_EQ(cached.trial->verdict, TrialVerdict::kFaster);
}

TEST_F(Exploration, AStoredPlacementSlowerThanTheStartIsNotKept) {
  // What a stored file says (another machine's, or a planted one) is no evidence: measured
  // slower here, the job stays on its start.
  ASSERT_TRUE(
      store->offer(0, setup.graph, setup.devices, {Placement{{0, 1, 0, 1}}, 1.0, "earlier"}));
  make_session();
  const Directive first = s->start();
  const Directive end = run_world(
      first, [&](const Directive& d) { return d.reason == Reason::kCached ? 40.0 : 8.0; });
  const CandidateRecord* cached = nullptr;
  for (const auto& [id, c] : s->candidates())
    if (c.reason == Reason::kCached) cached = &c;
  ASSERT_NE(cached, nullptr);
  EXPECT_NE(s->best()->reason, Reason::kCached);
  EXPECT_NE(end.placement.device_of_op, cached->placement.device_of_op);
}

TEST_F(Exploration, PastItsReexplorationsADriftOnlyTakesANewReference) {
  // A job's own reported times start a re-exploration, which adds candidates: a session that has
  // re-explored kMaxReexplorations times keeps its placement and measures drift afresh.
  make_session();
  std::optional<Directive> d = run_until_exploiting(s->start());
  ASSERT_TRUE(d);
  // The placement in force takes its reference from 40 steps, 3 steps 30% slower are a drift, and
  // the job re-explores until it exploits again: kMaxReexplorations times.
  double best_time = 0;
  for (uint64_t cycle = 0;; ++cycle) {
    best_time = *s->best()->median();
    for (int i = 0; i < 40; ++i)
      ASSERT_FALSE(s->record({d->placement_id, step++, best_time, true, ""}));
    ASSERT_EQ(s->drift_reference(), best_time);
    if (cycle == Session::kMaxReexplorations) break;
    bool drifted = false;
    for (int i = 0; i < 3; ++i)
      drifted = s->record({d->placement_id, step++, best_time * 1.3, true, ""});
    ASSERT_TRUE(drifted);
    d = s->advance(*store);
    ASSERT_TRUE(d);
    ASSERT_EQ(s->state(), SessionState::kReexploring);
    d = run_until_exploiting(d);
    ASSERT_TRUE(d);
  }
  ASSERT_EQ(s->counters().reexplorations, Session::kMaxReexplorations);
  const size_t candidates = s->candidates().size();
  bool due = false;
  for (int i = 0; i < 3; ++i) due = s->record({d->placement_id, step++, best_time * 1.3, true, ""});
  ASSERT_TRUE(due);
  EXPECT_FALSE(s->advance(*store));
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_EQ(s->candidates().size(), candidates);
  EXPECT_FALSE(s->drift_reference()) << "measured afresh from here";
  for (int i = 0; i < 40; ++i)
    EXPECT_FALSE(s->record({d->placement_id, step++, best_time * 1.3, true, ""}));
  EXPECT_EQ(s->drift_reference(), best_time * 1.3);
}

TEST_F(Exploration, ALuckyScreeningIsNoEvidence) {
  // Every placement takes 8 in truth; the first candidate's screening happened to run at 4.
  setup.exploration.max_candidates = 2;
  make_session();
  const Directive first = s->start();
  const Directive d = run_world(first, [&](const Directive& d) {
    const CandidateRecord& c = s->candidates().at(d.placement_id);
    return d.placement_id == 2 && c.step_times.size() + c.warmup_steps < 4 ? 4.0 : 8.0;
  });
  const CandidateRecord& lucky = s->candidates().at(2);
  EXPECT_DOUBLE_EQ(*lucky.median(), 8.0) << "its trial windows measured the truth";
  ASSERT_TRUE(lucky.trial);
  EXPECT_EQ(lucky.trial->verdict, TrialVerdict::kNotFaster);
  EXPECT_EQ(lucky.trial->against, first.placement_id);
  EXPECT_EQ(d.placement_id, first.placement_id) << "the job stays on its start";
  EXPECT_EQ(s->best()->id, first.placement_id);
  EXPECT_DOUBLE_EQ(s->summary().speedup.value(), 1.0);
}

// Start {0,1,0,1} (6), then all on 0 (8, no trial), the warm start {1,1,0,1} (5: beats the start),
// then a policy certain of {1,1,1,1} (4: beats the warm start, never compared with the start).
class FinalCheck : public Exploration {
 protected:
  void make_final_check_session() {
    setup.start = Placement{{0, 1, 0, 1}};
    auto placer = std::make_unique<TabularPlacer>();
    tabular = placer.get();
    setup.placer = std::move(placer);
    make_session();
    offline::ImitationResult warm;
    warm.baseline = "simulator";
    warm.action = {1, 1, 0, 1};
    warm.placement = Placement{{1, 1, 0, 1}};
    s->warm_started(warm);
    for (auto& row : tabular->table->logits) row = {-50.0, 50.0};
  }
  TabularPlacer* tabular = nullptr;
};

TEST_F(FinalCheck, AChoiceNeverComparedWithTheStartIsCheckedAgainstItBeforeTheJobKeepsIt) {
  make_final_check_session();
  const Directive d = run_world(s->start(), [&](const Directive& d) { return units(d.placement); });
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  const CandidateRecord& chosen = *s->best();
  ASSERT_TRUE(chosen.trial);
  EXPECT_TRUE(chosen.trial->final_check);
  EXPECT_EQ(chosen.trial->against, 1u);
  EXPECT_EQ(chosen.trial->verdict, TrialVerdict::kFaster);
  EXPECT_EQ(s->candidates().at(3).trial->verdict, TrialVerdict::kFaster)
      << "the warm start beat the start";
  EXPECT_FALSE(s->candidates().at(2).trial) << "all on 0 screened too slow for a trial";
}

// Start {0,1,0,1} (6), all on 0 (8), the warm start {1,1,0,1} (4 while screened, 6 in its trial:
// it loses), then {1,1,1,1} (5: a trial against the start itself, one look at 8 pairs). With
// `one_pair_against`, its smallest difference in that trial goes the other way.
class FinalCheckAfterATrialAgainstTheStart : public FinalCheck {
 protected:
  Directive run(bool one_pair_against) {
    setup.exploration.max_trial_steps = 32;  // 8 pairs of 2-step windows: one look, at α = 0.01
    make_final_check_session();
    return run_world(s->start(), [&](const Directive& d) { return time_of(d, one_pair_against); });
  }
  double time_of(const Directive& d, bool one_pair_against) const {
    const auto& t = s->trial();
    if (d.placement.device_of_op == std::vector<int>{1, 1, 0, 1}) return t ? 6.0 : 4.0;
    if (d.placement.device_of_op != std::vector<int>{1, 1, 1, 1}) return units(d.placement);
    return one_pair_against && t && !t->final_check() && t->pairs() == 0 ? 6.03 : 5.0;
  }
  // The same, but the placer fails once {1,1,1,1} runs: the policy step after its trial throws,
  // and the session goes on as LiveSession::guarded() makes it.
  Directive run_then_fail(bool one_pair_against) {
    setup.exploration.max_trial_steps = 32;
    make_final_check_session();
    Directive d = s->start();
    for (int i = 0; i < 100000 && s->state() != SessionState::kExploiting; ++i) {
      if (d.placement.device_of_op == std::vector<int>{1, 1, 1, 1}) tabular->fail = true;
      if (!s->record({d.placement_id, step++, time_of(d, one_pair_against), true, ""})) continue;
      std::optional<Directive> next;
      try {
        next = s->advance(*store);
      } catch (const std::exception& e) {
        next = s->policy_failed(e.what());
      }
      if (next) d = *next;
    }
    EXPECT_FALSE(s->policy_error().empty()) << "premise: the placer failed";
    return d;
  }
  const CandidateRecord& warm() const { return s->candidates().at(3); }
  bool final_check_ran() const {
    for (const auto& m : s->timeline().marks())
      if (m.final_check) return true;
    return false;
  }
};

TEST_F(FinalCheckAfterATrialAgainstTheStart, EvidenceThatHoldsAcrossEveryTrialIsNotTestedAgain) {
  // Its 8 pairs all faster: p = 2^-8, and 2 trials held: 2 × 2^-8 <= 1%.
  const Directive d = run(false);
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  ASSERT_TRUE(warm().trial);
  EXPECT_EQ(warm().trial->verdict, TrialVerdict::kNotFaster) << "premise: two trials held";
  const CandidateRecord& chosen = *s->best();
  ASSERT_TRUE(chosen.trial);
  EXPECT_EQ(chosen.trial->against, 1u);
  EXPECT_DOUBLE_EQ(chosen.trial->p_faster, 1.0 / 256);
  EXPECT_TRUE(chosen.trial->stands_for_final_check);
  EXPECT_FALSE(final_check_ran()) << "it would have repeated that trial, on the start's steps";
  EXPECT_NE(describe(*chosen.trial).find("stood for the final check"), std::string::npos);
  s->persist_best(*store);
  store->flush();
  EXPECT_EQ(store->best(0, *s->graph(), s->devices())->placement.device_of_op,
            (std::vector<int>{1, 1, 1, 1}))
      << "it is offered to the next run as a checked choice";
}

TEST_F(FinalCheckAfterATrialAgainstTheStart, EvidenceThatManyTrialsMakeDoubtfulIsChecked) {
  // One pair against it: p = 2 × 2^-8, enough for its own trial but not across the 2 held.
  const Directive d = run(true);
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  const CandidateRecord& chosen = *s->best();
  ASSERT_TRUE(chosen.trial);
  EXPECT_TRUE(chosen.trial->final_check);
  EXPECT_EQ(chosen.trial->verdict, TrialVerdict::kFaster);
  EXPECT_TRUE(final_check_ran());
  bool won_its_trial = false;
  for (const auto& m : s->timeline().marks())
    won_its_trial |= m.candidate == chosen.id && !m.final_check && m.verdict == "faster";
  EXPECT_TRUE(won_its_trial) << "premise: its trial against the start said faster";
}

// A plugin failure ends exploration with no final check: a choice whose own trial beat the start
// by evidence that holds across every trial stays (on the GPU, the all-on-GPU placement, 4x the
// start's speed, was dropped for the start so: docs/gpu-runs/2026-11-27-3.md); one whose evidence
// the trials make doubtful does not.
TEST_F(FinalCheckAfterATrialAgainstTheStart,
       APluginFailureAfterItsTrialKeepsAChoiceItsEvidenceHolds) {
  const Directive d = run_then_fail(false);
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  const CandidateRecord& chosen = *s->best();
  EXPECT_EQ(chosen.placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  ASSERT_TRUE(chosen.trial);
  EXPECT_TRUE(chosen.trial->stands_for_final_check);
  EXPECT_FALSE(final_check_ran());
}

TEST_F(FinalCheckAfterATrialAgainstTheStart,
       APluginFailureAfterItsTrialDropsAChoiceItsEvidenceDoesNotHold) {
  const Directive d = run_then_fail(true);
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{0, 1, 0, 1})) << "back to the start";
  EXPECT_EQ(s->best()->id, 1u);
}

TEST_F(FinalCheck, WithoutEvidenceAgainstTheStartTheJobGoesBackToIt) {
  make_final_check_session();
  // The machine changes once the final check begins: every placement now takes 6.
  const Directive d = run_world(s->start(), [&](const Directive& d) {
    return s->trial() && s->trial()->final_check() ? 6.0 : units(d.placement);
  });
  EXPECT_EQ(d.placement_id, 1u);
  EXPECT_EQ(d.placement.device_of_op, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(s->best()->id, 1u);
  const CandidateRecord& choice = s->candidates().at(4);
  ASSERT_TRUE(choice.trial);
  EXPECT_TRUE(choice.trial->final_check);
  EXPECT_NE(choice.trial->verdict, TrialVerdict::kFaster);
  // What placementctl calls the best is what runs, with its interval.
  const auto j = s->summary();
  EXPECT_EQ(j.best_step_time_s, s->candidates().at(1).median());
  EXPECT_TRUE(j.best_step_time_interval_s);
}

TEST_F(FinalCheck, GivesTheChoiceUpOnlyOnNinetyNinePercentEvidence) {
  // Screening trials give a challenger up on 90% evidence against min_gain; the final check's
  // challenger has won a trial already, so it takes 99%
  // (Trial.AStricterFutilityBoundGivesUpARealGainOnlyOnStrongerEvidence).
  make_final_check_session();
  std::optional<Directive> d = s->start();
  double screening_alpha = 0;
  for (int i = 0; i < 100000 && !(s->trial() && s->trial()->final_check()); ++i) {
    if (s->trial()) screening_alpha = s->trial()->plan().futility_alpha;
    if (s->record({d->placement_id, step++, units(d->placement), true, ""}))
      if (auto next = s->advance(*store)) d = next;
  }
  ASSERT_TRUE(s->trial() && s->trial()->final_check());
  EXPECT_EQ(screening_alpha, 0.1) << "premise: a screening trial ran first";
  EXPECT_EQ(s->trial()->plan().futility_alpha, 0.01);
}

TEST_F(FinalCheck, MayTakeTwiceATrialsStepsBeforeItCallsTheAnswerUnclear) {
  // In the final check the choice is 2% faster, give or take 20% from one pair of windows to the
  // next (spread evenly): no look can show it faster or rule out a 2% gain. Ending unclear sends
  // the job back to its start for good, so the final check goes on to twice max_trial_steps first.
  setup.exploration.max_trial_steps = 200;  // 50 pairs of 2-step windows; the final check 100
  make_final_check_session();
  const Directive d = run_world(s->start(), [&](const Directive& d) {
    if (!s->trial() || !s->trial()->final_check()) return units(d.placement);
    if (d.placement_id == s->trial()->incumbent()) return 6.0;
    const double spread = std::fmod(0.618034 * static_cast<double>(s->trial()->pairs()), 1.0) - 0.5;
    return 6.0 * std::exp(-0.02 + 0.4 * spread);
  });
  EXPECT_EQ(d.placement_id, 1u);
  const CandidateRecord& choice = s->candidates().at(4);
  ASSERT_TRUE(choice.trial);
  EXPECT_TRUE(choice.trial->final_check);
  EXPECT_EQ(choice.trial->verdict, TrialVerdict::kUnclear);
  EXPECT_EQ(choice.trial->pairs, 100);
}

TEST_F(FinalCheck, AStartThatFailsInTheFinalCheckLeavesTheJobOnItsChoice) {
  make_final_check_session();
  std::optional<Directive> d = s->start();
  for (int i = 0; i < 100000 && s->state() != SessionState::kExploiting; ++i) {
    // The start no longer fits once the final check begins (another job took the memory).
    const bool fails = s->trial() && s->trial()->final_check() && d->placement_id == 1;
    if (s->record(
            {d->placement_id, step++, units(d->placement), !fails, fails ? "out of memory" : ""}))
      if (auto next = s->advance(*store)) d = next;
  }
  ASSERT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_EQ(d->placement.device_of_op, (std::vector<int>{1, 1, 1, 1}));
  const CandidateRecord& chosen = *s->best();
  ASSERT_TRUE(chosen.trial);
  EXPECT_TRUE(chosen.trial->final_check);
  EXPECT_EQ(chosen.trial->note, "the start failed a step");
}

TEST_F(FinalCheck, APluginFailureDuringTheFinalCheckGoesBackToTheStartAndNothingUncheckedIsStored) {
  make_final_check_session();
  std::optional<Directive> d = s->start();
  for (int i = 0; i < 100000 && !(s->trial() && s->trial()->final_check()); ++i)
    if (s->record({d->placement_id, step++, units(d->placement), true, ""}))
      if (auto next = s->advance(*store)) d = next;
  ASSERT_TRUE(s->trial() && s->trial()->final_check());
  EXPECT_NE(s->incumbent(), 1u) << "premise: the winner is in force while it is checked";
  EXPECT_FALSE(s->persist_best(*store)) << "an unchecked winner is not offered to the next run";
  d = s->stop_exploring("policy step: it exploded");
  EXPECT_EQ(s->state(), SessionState::kExploiting);
  EXPECT_EQ(s->best()->id, 1u);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->placement_id, 1u);
  s->persist_best(*store);
  store->flush();
  EXPECT_EQ(store->best(0, *s->graph(), s->devices())->placement.device_of_op,
            (std::vector<int>{0, 1, 0, 1}))
      << "the start, stored when it was measured, is all the store has";
}

TEST_F(Exploration, WhenTheStartFailsTheFirstCandidateThatRunsIsInForce) {
  setup.start = Placement{{0, 1, 0, 1}};
  make_session();
  std::optional<Directive> d = s->start();
  for (int i = 0; i < 100000 && s->state() != SessionState::kExploiting; ++i) {
    const bool fails = d->placement_id == 1;
    if (s->record(
            {d->placement_id, step++, units(d->placement), !fails, fails ? "out of memory" : ""}))
      if (auto next = s->advance(*store)) d = next;
  }
  ASSERT_EQ(s->state(), SessionState::kExploiting);
  ASSERT_NE(s->best(), nullptr);
  EXPECT_NE(s->best()->id, 1u);
  EXPECT_NE(d->placement_id, 1u) << "the job is not sent back to the failing start";
}

TEST_F(Exploration, TrialWindowsAreExplorationOnlyOnTheChallenger) {
  setup.exploration.max_candidates = 2;
  setup.exploration.warmup_steps = 0;
  make_session();
  run_world(s->start(), [&](const Directive& d) { return units(d.placement); });
  uint64_t on_challengers = 0;
  for (const auto& [id, c] : s->candidates())
    if (id != 1) on_challengers += c.step_times.size() + c.warmup_steps;
  EXPECT_EQ(s->counters().exploration_steps, on_challengers);
  EXPECT_LT(s->counters().exploration_steps, s->counters().steps);
}

TEST_F(Exploration, ReportsOfUnknownPlacementsAreStray) {
  make_session();
  s->start();
  EXPECT_FALSE(s->record({99, 0, 1.0, true, ""}));
  EXPECT_EQ(s->counters().stray_reports, 1u);
  EXPECT_EQ(s->counters().steps, 0u);
}

// Start {0,1,0,1} (6 units a step), then all on 0 (8), then a policy certain of {1,1,1,1}: 1%
// faster than the start, give or take 3% from one pair of windows to the next (spread evenly), a
// gain smaller than min_gain (2%). Its trial is capped at 8 pairs: too few to tell.
class Refinement : public Exploration {
 protected:
  // `expected_steps`: what the job says it will run (refinement may take refine_fraction of them).
  // `max_candidates` and `logits` (each group's, for devices 0 and 1): how long and how surely
  // the policy proposes the chosen placement.
  void make_refinement_session(uint64_t expected_steps = 100000, int64_t max_candidates = 4,
                               std::vector<double> logits = {-50.0, 50.0}) {
    setup.start = Placement{{0, 1, 0, 1}};
    setup.expected_steps = expected_steps;
    setup.exploration.max_trial_steps = 32;
    setup.exploration.max_candidates = max_candidates;
    auto placer = std::make_unique<TabularPlacer>();
    TabularPlacer* tabular = placer.get();
    setup.placer = std::move(placer);
    make_session();
    for (auto& row : tabular->table->logits) row = logits;
  }
  static bool chosen(const Directive& d) {
    return d.placement.device_of_op == std::vector<int>{1, 1, 1, 1};
  }
  // The world above; `long_trial_gain` is the chosen placement's gain in long trials
  // (refinement's and the final check), where it may differ from what its short trial saw.
  double time_of(const Directive& d, double long_trial_gain = 0.01) const {
    if (d.placement.device_of_op == std::vector<int>{0, 0, 0, 0}) return 8.0;
    if (!chosen(d)) return 6.0;
    const bool long_trial = s->trial() && s->trial()->plan().max_steps > 64;
    const double gain = long_trial ? long_trial_gain : short_trial_gain_;
    const double pairs = s->trial() ? static_cast<double>(s->trial()->pairs()) : 0.0;
    const double spread = std::fmod(0.618034 * pairs, 1.0) - 0.5;
    return 6.0 * std::exp(-gain + (long_trial ? long_trial_spread_ : 0.06) * spread);
  }
  // The verdicts of the chosen placement's trials, in order.
  std::vector<std::string> verdicts_of_chosen() const {
    std::vector<std::string> out;
    for (const auto& m : s->timeline().marks())
      if (chosen_id_ && m.candidate == chosen_id_)
        out.push_back(std::string(m.final_check ? "final: " : "") + m.verdict);
    return out;
  }
  Directive run() {
    return run_world(s->start(), [&](const Directive& d) {
      if (chosen(d)) chosen_id_ = d.placement_id;
      return time_of(d, long_trial_gain_);
    });
  }
  uint64_t chosen_id_ = 0;
  double long_trial_gain_ = 0.01;
  // What its screening and short trial see (else the same 1%).
  double short_trial_gain_ = 0.01;
  // The spread of its long trials' pairs (6%, as in short trials: ±3%).
  double long_trial_spread_ = 0.06;
};

TEST_F(Refinement, AGainBelowMinGainThatAShortTrialLeavesUnclearIsKeptAfterALongOne) {
  make_refinement_session();
  const Directive d = run();
  EXPECT_TRUE(chosen(d)) << "the job keeps the 1% faster placement";
  EXPECT_EQ(verdicts_of_chosen(), (std::vector<std::string>{"unclear", "faster"}))
      << "its own trial could not tell; refinement's long trial, against the start itself, did";
  const CandidateRecord& c = s->candidates().at(chosen_id_);
  ASSERT_TRUE(c.trial);
  EXPECT_TRUE(c.trial->refinement);
  EXPECT_EQ(c.trial->against, 1u);
  EXPECT_TRUE(c.trial->stands_for_final_check) << "a final check would repeat that long trial";
  EXPECT_GT(c.trial->pairs, 8) << "it ran longer than an ordinary trial may";
  EXPECT_LE(s->counters().steps, 100000u);
  // The long trials within refine_fraction of the job (both arms): the chosen ran half of two of
  // them at most, and its screening and short trial.
  EXPECT_LE(c.steps_run, static_cast<uint64_t>(setup.exploration.refine_fraction * 100000) + 100u);
}

TEST_F(Refinement, AContenderItsShortTrialSawSlowerByLessThanItsNoiseStillGetsItsLongTrial) {
  // The short trial's estimate has the wrong sign (0.8% slower, give or take 3% a pair): what it
  // measured leaves a fair chance of a 0.5% gain, and the long trial finds the 1% there is.
  short_trial_gain_ = -0.008;
  make_refinement_session();
  const Directive d = run();
  EXPECT_TRUE(chosen(d));
  const std::vector<std::string> verdicts = verdicts_of_chosen();
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_NE(verdicts[0], "faster");
  EXPECT_EQ(verdicts[1], "faster");
}

TEST_F(Refinement, ACandidateItsScreeningShowedClearlySlowerIsNoContender) {
  short_trial_gain_ = -0.08;  // 8% slower where it was measured: no chance of a 0.5% gain
  make_refinement_session();
  const Directive d = run();
  EXPECT_EQ(d.placement_id, 1u) << "the job stays on its start";
  EXPECT_TRUE(verdicts_of_chosen().empty()) << "its screening kept it from a trial, long or short";
  EXPECT_FALSE(s->candidates().at(chosen_id_).trial);
}

TEST_F(Refinement, AContenderThatWasOnlyLuckyInItsShortTrialLosesItsLongOne) {
  long_trial_gain_ = 0.0;  // in truth as fast as the start: its short trial's 1% was luck
  make_refinement_session();
  const Directive d = run();
  EXPECT_EQ(d.placement_id, 1u) << "the job stays on its start";
  const CandidateRecord& c = s->candidates().at(chosen_id_);
  ASSERT_TRUE(c.trial);
  EXPECT_TRUE(c.trial->refinement);
  EXPECT_NE(c.trial->verdict, TrialVerdict::kFaster);
  EXPECT_NE(describe(*c.trial).find("in a long trial"), std::string::npos) << describe(*c.trial);
}

TEST_F(Refinement, AContenderItsLongTrialCannotTellApartIsTakenByItsEstimateButNotKeptUnchecked) {
  // 0.3% faster, give or take 10% from pair to pair in long trials: no long trial can tell that
  // at the trials' confidence, nor rule out a 0.5% gain; its estimate's side is the faster one.
  long_trial_gain_ = 0.003;
  long_trial_spread_ = 0.2;
  make_refinement_session();
  const Directive d = run();
  EXPECT_EQ(verdicts_of_chosen(),
            (std::vector<std::string>{"unclear", "faster by its estimate", "final: unclear"}))
      << "taken by its estimate, then held to the start at the trials' confidence";
  EXPECT_EQ(d.placement_id, 1u) << "a gain the final check cannot show is not kept";
}

TEST_F(Refinement, AContenderItsLongTrialCannotTellApartThatEstimatesSlowerIsNotTaken) {
  long_trial_gain_ = -0.002;
  long_trial_spread_ = 0.4;
  make_refinement_session();
  const Directive d = run();
  EXPECT_EQ(d.placement_id, 1u);
  EXPECT_EQ(verdicts_of_chosen(), (std::vector<std::string>{"unclear", "unclear"}))
      << "no final check: the incumbent stayed the start";
  const CandidateRecord& c = s->candidates().at(chosen_id_);
  ASSERT_TRUE(c.trial && c.trial->log_ratio);
  EXPECT_GT(c.trial->log_ratio->estimate, 0.0);
}

TEST(RefinementShares, EqualSharesOfWhatIsLeftNoneShorterThanAFinalCheck) {
  EXPECT_EQ(long_trial_share(40000, 8000, 4), 10000);
  EXPECT_EQ(long_trial_share(30000, 8000, 3), 10000) << "what the earlier ones left, shared anew";
  EXPECT_EQ(long_trial_share(20000, 8000, 4), 10000) << "two shares of 8000 or more, not four";
  EXPECT_EQ(long_trial_share(9000, 8000, 4), 9000);
  EXPECT_EQ(long_trial_share(7000, 8000, 4), 0) << "shorter than a final check: none";
  EXPECT_EQ(long_trial_share(40000, 0, 2), 20000);
}

TEST_F(Refinement, ALongTrialWonAfterExplorationConvergedDoesNotStartItAgain) {
  // A policy that may still propose placements not run yet, and exploration that ends by
  // converging: refinement's win must lead to the final check, not to more candidates.
  setup.exploration.converge_candidates = 2;
  make_refinement_session(100000, 30, {0.0, 2.0});
  const Directive d = run();
  EXPECT_TRUE(chosen(d));
  std::optional<uint64_t> won_at;
  for (const auto& m : s->timeline().marks())
    if (m.candidate == chosen_id_ && m.verdict == "faster" && !m.final_check) won_at = m.step;
  ASSERT_TRUE(won_at) << "the chosen placement won a long trial";
  for (const auto& [id, c] : s->candidates())
    EXPECT_LT(c.measured_at_step.value_or(0), *won_at)
        << "placement " << id << " was screened after refinement's win";
  EXPECT_EQ(verdicts_of_chosen().back(), "faster");
  EXPECT_EQ(s->state(), SessionState::kExploiting);
}

TEST_F(Refinement, NeedsAJobThatSaysHowLongItRuns) {
  // Without expected_steps there is no budget to size a long trial from: the short trial's
  // "unclear" stands and the job keeps its start.
  make_refinement_session(0);
  const Directive d = run();
  EXPECT_EQ(d.placement_id, 1u);
  EXPECT_EQ(verdicts_of_chosen(), (std::vector<std::string>{"unclear"}));
}

TEST_F(Refinement, NoContendersNoRefinement) {
  setup.exploration.refine_contenders = 0;
  make_refinement_session();
  const Directive d = run();
  EXPECT_EQ(d.placement_id, 1u);
  EXPECT_EQ(verdicts_of_chosen(), (std::vector<std::string>{"unclear"}));
}

}  // namespace
}  // namespace placementd
