// Warm start: the policy imitates a baseline's placement before it samples, so its first candidates
// are the baseline's, and it reaches the optimum in fewer evaluations than from scratch.
#include <gtest/gtest.h>

#include <cstdio>

#include "built_plugins.h"
#include "planning/offline/optimize.h"
#include "planning/offline/warm_start.h"
#include "test_graphs.h"

namespace placementd::offline {
namespace {

using placement::DeviceKind;

class WarmStart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!built_plugins().has(placement::PluginKind::kPlacer, "feedforward"))
      GTEST_SKIP() << "learned placers not built (no LibTorch)";
  }

  // Two independent chains of 6 heavy ops and a join on two GPUs: list scheduling puts one chain
  // on each, which is the optimum; a uniform policy finds it by chance only.
  static sim::Simulator two_chains() {
    placement::OpGraph g = placement::testing::two_chains(6);
    placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
    return sim::Simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  }

  static OptimizeResult run(const sim::Simulator& simulator, const std::string& imitate,
                            int64_t budget, uint64_t seed, double target_probability = 0.9) {
    OptimizeOptions o;
    o.grouper = {"none", {}};
    o.placer = {"feedforward", {}};
    o.algorithm = {"reinforce", {}};
    o.budget = budget;
    o.seed = seed;
    o.imitation.baseline = imitate;
    o.imitation.target_probability = target_probability;
    return optimize(simulator, built_plugins(), o);
  }
};

TEST_F(WarmStart, TheFirstCandidatesAreTheImitatedBaselines) {
  const sim::Simulator simulator = two_chains();
  const OptimizeResult r = run(simulator, "list_scheduling", 10, 5, 0.99);
  ASSERT_TRUE(r.imitation);
  EXPECT_EQ(r.imitation->skipped, "");
  EXPECT_LT(r.imitation->probability_before, 0.9)
      << "an untrained policy is near uniform over 2 devices";
  EXPECT_GE(r.imitation->probability_after, 0.99);
  EXPECT_GT(r.imitation->steps, 0);
  EXPECT_LE(r.imitation->steps, 200);
  ASSERT_TRUE(r.imitation->baseline_step_time_s);
  EXPECT_EQ(r.curve.front().step_time_s, r.imitation->baseline_step_time_s)
      << "the first candidate is the mode";
  int as_baseline = 0;
  for (size_t i = 0; i < 5; ++i)
    as_baseline += r.curve[i].step_time_s == r.imitation->baseline_step_time_s;
  EXPECT_GE(as_baseline, 4)
      << "0.99 per group over 13 groups: ~88% of samples are the baseline's placement "
         "(until the algorithm's updates move the policy)";
  EXPECT_DOUBLE_EQ(*r.curve.front().best_so_far_s, *r.imitation->baseline_step_time_s);
}

TEST_F(WarmStart, ReachesTheOptimumInFewerEvaluationsThanFromScratch) {
  const sim::Simulator simulator = two_chains();
  const double optimum =
      simulator.simulate(placement::Placement{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}).step_time_s;
  // Evaluations until a candidate within 2% of the optimum, summed over seeds (budget if never).
  auto evaluations_to_optimum = [&](const std::string& imitate) {
    int64_t total = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const OptimizeResult r = run(simulator, imitate, 150, seed);
      int64_t n = static_cast<int64_t>(r.curve.size());
      for (size_t i = 0; i < r.curve.size(); ++i)
        if (r.curve[i].best_so_far_s && *r.curve[i].best_so_far_s <= optimum * 1.02) {
          n = static_cast<int64_t>(i + 1);
          break;
        }
      total += n;
    }
    return total;
  };
  const int64_t cold = evaluations_to_optimum(""), warm = evaluations_to_optimum("list_scheduling");
  EXPECT_LE(warm, 12) << "warm: the optimum within the first few samples of every seed (cold "
                      << cold << ")";
  EXPECT_GT(cold, 3 * warm) << "cold " << cold << " vs warm " << warm;
  std::printf("evaluations to the optimum over 3 seeds: cold %lld, warm %lld\n",
              static_cast<long long>(cold), static_cast<long long>(warm));
}

TEST_F(WarmStart, TheSimulatorSearchFindsTheOptimumBeforeTheFirstCandidate) {
  // The search runs on a planning model 20% off (optimize's default model error), which does not
  // move the optimum of a graph this clear-cut; the first candidate, timed on the true simulator,
  // is that optimum.
  const sim::Simulator simulator = two_chains();
  const double optimum =
      simulator.simulate(placement::Placement{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}).step_time_s;
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"feedforward", {}};
  o.algorithm = {"reinforce", {}};
  o.budget = 5;
  o.imitation.baseline = kSimulatorWarmStart;
  o.imitation.search.evaluations = 2000;
  const OptimizeResult r = optimize(simulator, built_plugins(), o);
  ASSERT_TRUE(r.imitation);
  ASSERT_EQ(r.imitation->skipped, "");
  EXPECT_GT(r.imitation->search_evaluations, 500);
  EXPECT_LE(r.imitation->search_evaluations, 2000);
  EXPECT_FALSE(r.imitation->search_start.empty());
  EXPECT_TRUE(r.imitation->search_start_step_time_s);
  EXPECT_GT(r.imitation->steps, 0);
  ASSERT_TRUE(r.curve.front().step_time_s);
  EXPECT_LE(*r.curve.front().step_time_s, optimum * 1.0001)
      << "the first candidate is the search's answer";
  const nlohmann::json j = to_json(*r.imitation);
  EXPECT_EQ(j["search_evaluations"], r.imitation->search_evaluations);
  EXPECT_EQ(j["baseline"], "simulator");
}

TEST_F(WarmStart, TheSimulatorSearchNeedsProfiles) {
  // A live graph before its profile: nothing to time, so no search, and the reason says so.
  placement::OpGraph g = placement::testing::two_chains(3);
  const sim::Simulator unprofiled(g, placement::testing::devices(2, DeviceKind::kCuda));
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"feedforward", {}};
  o.budget = 1;
  o.imitation.baseline = kSimulatorWarmStart;
  const OptimizeResult r = optimize(unprofiled, built_plugins(), o);
  ASSERT_TRUE(r.imitation);
  EXPECT_NE(r.imitation->skipped.find("simulator search"), std::string::npos)
      << r.imitation->skipped;
  EXPECT_NE(r.imitation->skipped.find("profile"), std::string::npos) << r.imitation->skipped;
  EXPECT_EQ(r.imitation->steps, 0);
}

TEST_F(WarmStart, SaysWhyItImitatedNothing) {
  const sim::Simulator simulator = two_chains();
  EXPECT_NE(run(simulator, "no_such_placer", 1, 1)
                .imitation->skipped.find("'no_such_placer' is not loaded"),
            std::string::npos);
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"single_device", {}};
  o.budget = 1;
  o.imitation.baseline = "list_scheduling";
  EXPECT_NE(optimize(simulator, built_plugins(), o).imitation->skipped.find("deterministic"),
            std::string::npos);
  // A baseline whose placement does not fit is not imitated: 8 × 300 MiB of parameters (×4 with
  // Adam) on 6 GiB devices fit only when split, and single_device does not split.
  placement::OpGraph big = placement::testing::chain(8);
  for (auto& op : big.ops) op.parameter_bytes = 300ull << 20;
  placement::testing::profile_all(big, DeviceKind::kCuda, 1e-3);
  const sim::Simulator small_devices(big,
                                     placement::testing::devices(2, DeviceKind::kCuda, 6ull << 30));
  const OptimizeResult r = run(small_devices, "single_device", 1, 1);
  EXPECT_NE(r.imitation->skipped.find("does not fit"), std::string::npos) << r.imitation->skipped;
  EXPECT_EQ(r.imitation->steps, 0);
}

}  // namespace
}  // namespace placementd::offline
