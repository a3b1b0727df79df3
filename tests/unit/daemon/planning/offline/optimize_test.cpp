// Learning tests: the real plugins, trained against the simulator on small graphs whose optimum is
// known. Each algorithm runs with the placer it is paired with in its paper (ColocRL/HP: reinforce
// + seq2seq after; EAGLE: ppo + seq2seq before, ppo + gcn; Spotlight; Post), default
// hyperparameters except the seq2seq width; the policy itself
// (not the baselines the answer also includes) has to find the optimum within a fixed budget.
#include <gtest/gtest.h>

#include <ostream>

#include "built_plugins.h"
#include "placement/serialization.h"
#include "planning/offline/baseline.h"
#include "planning/offline/optimize.h"
#include "planning/sim/device_presets.h"
#include "planning/sim/model_error.h"
#include "planning/sim/topology.h"
#include "test_graphs.h"

namespace placementd::offline {
namespace {

using placement::DeviceKind;

const PluginRegistry& registry() { return built_plugins(); }

struct Pairing {
  std::string algorithm, placer;
  placement::Params placer_params;
  placement::Params algorithm_params;
};

// What gtest prints for a parameter (test listings, failures) instead of its bytes.
void PrintTo(const Pairing& p, std::ostream* os) { *os << p.algorithm << " + " << p.placer; }

std::string name_of(const ::testing::TestParamInfo<Pairing>& info) {
  std::string attention;
  if (auto it = info.param.placer_params.find("attention"); it != info.param.placer_params.end())
    attention = "_" + std::get<std::string>(it->second);
  return info.param.algorithm + "_" + info.param.placer + attention;
}

class Learning : public ::testing::TestWithParam<Pairing> {
 protected:
  void SetUp() override {
    if (!registry().has(placement::PluginKind::kPlacer, GetParam().placer))
      GTEST_SKIP() << "placer " << GetParam().placer << " not built (no LibTorch)";
  }

  OptimizeResult run(const sim::Simulator& simulator, int64_t budget, uint64_t seed = 3) {
    OptimizeOptions o;
    o.grouper = {"none", {}};
    o.placer = {GetParam().placer, GetParam().placer_params};
    o.algorithm = {GetParam().algorithm, GetParam().algorithm_params};
    o.budget = budget;
    o.seed = seed;
    return optimize(simulator, registry(), o);
  }
};

// Two independent chains of 6 heavy ops that meet in a join: one chain per GPU halves the step
// (1 of the 2^13 placements' worth of structure has to be found, not guessed).
TEST_P(Learning, TwoIndependentChainsGoToTwoDevices) {
  placement::OpGraph g = placement::testing::two_chains(6);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  const double split =
      simulator.simulate(placement::Placement{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}).step_time_s;
  const OptimizeResult r = run(simulator, 400);
  ASSERT_TRUE(r.policy_best_s);
  EXPECT_LE(*r.policy_best_s, split * 1.02) << "optimum " << split << " s";
  EXPECT_LT(split, r.baselines.at("single_device").value() * 0.6);
}

// 8 ops of 300 MiB parameters each (Adam: ×4 with gradients and moments) on two 6 GiB devices:
// nothing fits on one device; only splits near the middle do.
TEST_P(Learning, AGraphThatOnlyFitsWhenSplit) {
  placement::OpGraph g = placement::testing::chain(8);
  for (auto& op : g.ops) op.parameter_bytes = 300ull << 20;
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda, 6ull << 30));
  const OptimizeResult r = run(simulator, 300);
  EXPECT_FALSE(r.baselines.at("single_device").has_value()) << "all on one device must not fit";
  ASSERT_TRUE(r.policy_best_s) << "the policy never found a placement that fits";
  EXPECT_GT(r.invalid_rejected, 0) << "out-of-memory candidates are rejected, not run";
  // Any valid split costs the same compute; the best has a single crossing.
  const double one_cut =
      simulator.simulate(placement::Placement{{0, 0, 0, 0, 1, 1, 1, 1}}).step_time_s;
  EXPECT_LE(*r.policy_best_s, one_cut * 1.02);
}

// A chain whose activations are large: any split pays transfers and gains no parallelism.
TEST_P(Learning, AChainWhereAnySplitIsWorseStaysTogether) {
  placement::OpGraph g = placement::testing::chain(8, 64ull << 20);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  const double together = simulator.simulate(placement::Placement::single(g, 0)).step_time_s;
  const OptimizeResult r = run(simulator, 300);
  ASSERT_TRUE(r.policy_best_s);
  EXPECT_LE(*r.policy_best_s, together * 1.02);
}

TEST_P(Learning, SameSeedSameResult) {
  placement::OpGraph g = placement::testing::two_chains(4);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  const OptimizeResult a = run(simulator, 40, 11), b = run(simulator, 40, 11),
                       c = run(simulator, 40, 12);
  ASSERT_EQ(a.curve.size(), b.curve.size());
  for (size_t i = 0; i < a.curve.size(); ++i) {
    EXPECT_EQ(a.curve[i].measured_s, b.curve[i].measured_s) << "candidate " << i;
  }
  EXPECT_EQ(a.best.device_of_op, b.best.device_of_op);
  bool differs = false;
  for (size_t i = 0; i < a.curve.size(); ++i)
    differs |= a.curve[i].measured_s != c.curve[i].measured_s;
  EXPECT_TRUE(differs) << "another seed gives other samples";
}

INSTANTIATE_TEST_SUITE_P(
    PapersPairings, Learning,
    // seq2seq at the papers' 256 hidden units costs ~0.1 s per update on a 2-core CI machine
    // (bench/policy_bench); 64 keeps these tests to seconds and changes no code path. REINFORCE at
    // HP's Adam lr 0.1 collapses onto an early sample here (a 27 ms placement instead of 21 ms on
    // the two-chain graph), so it runs at 0.01, the learning rate EAGLE uses for PPO.
    ::testing::Values(
        Pairing{"reinforce",
                "seq2seq",
                {{"attention", std::string("after")}, {"hidden", int64_t{64}}},
                {{"learning_rate", 0.01}}},
        Pairing{"ppo", "seq2seq", {{"attention", std::string("before")}, {"hidden", int64_t{64}}}},
        Pairing{"spotlight", "seq2seq", {{"hidden", int64_t{64}}}},
        Pairing{"post", "feedforward", {}}, Pairing{"ppo", "gcn", {}}),
    name_of);

TEST(Optimize, DeterministicPlacerIsEvaluatedOnceAndBaselinesAreReported) {
  placement::OpGraph g = placement::testing::two_chains(3);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"single_device", {}};
  o.budget = 50;
  o.baselines.push_back("no_such_placer");
  const OptimizeResult r = optimize(simulator, registry(), o);
  EXPECT_EQ(r.evaluations, 1);
  for (const char* name :
       {"single_device", "expert", "metis", "scotch", "mincut", "list_scheduling"})
    EXPECT_TRUE(r.baselines.count(name)) << name;
  EXPECT_FALSE(r.baselines.count("no_such_placer")) << "plugins that are not loaded are left out";
  EXPECT_DOUBLE_EQ(r.lower_bound_s, simulator.lower_bound_s());
  for (const auto& [name, t] : r.baselines) {
    if (t) {
      EXPECT_LE(r.best_step_time_s, *t) << "never worse than baseline " << name;
    }
  }
}

// A graph captured without a profile, on a CPU without figures and two GPUs with them: every
// baseline plans on the cost model's predictions (the placers read the predicted GPU profiles of
// simulator.graph()) and lands on the GPUs, none on the CPU it cannot time.
TEST(Optimize, BaselinesPlanAGraphCapturedWithoutProfilesOnThePredictedDevices) {
  placement::OpGraph g = placement::testing::two_chains(4);
  placement::testing::give_work(g, 2e9, 1e6, 1 << 20);
  placement::DeviceSet devices = placement::testing::devices(3, DeviceKind::kCuda, 8ull << 30);
  devices.devices[0].kind = DeviceKind::kCpu;
  for (size_t d = 1; d < 3; ++d)
    devices.devices[d].spec = sim::find_device_preset("h100-sxm")->spec;
  const sim::Simulator simulator(g, devices);
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"single_device", {}};
  o.budget = 4;
  const OptimizeResult r = optimize(simulator, registry(), o);
  for (const char* name :
       {"single_device", "expert", "metis", "scotch", "mincut", "list_scheduling"}) {
    ASSERT_TRUE(r.baselines.count(name)) << name;
    EXPECT_TRUE(r.baselines.at(name).has_value())
        << name << ": " << (r.baseline_errors.count(name) ? r.baseline_errors.at(name) : "");
  }
  EXPECT_EQ(std::count(r.best.device_of_op.begin(), r.best.device_of_op.end(), 0), 0)
      << "nothing on the CPU";
}

TEST(Optimize, BaselinesPlanOnTheSameModelAsTheSearchAndAreTimedOnTheTruth) {
  placement::OpGraph g = placement::testing::two_chains(6);
  for (placement::Op& op : g.ops)
    op.profile["cuda"] = {1e-3 * (1 + op.id % 4), 2e-3 * (1 + op.id % 3), 0.0, 0};
  const sim::Simulator truth(g, placement::testing::devices(3, DeviceKind::kCuda));
  placement::Grouping each_op;
  each_op.num_groups = static_cast<int>(g.ops.size());
  for (int i = 0; i < each_op.num_groups; ++i) each_op.group_of_op.push_back(i);
  OptimizeOptions o;
  o.grouper = {"none", {}};
  o.placer = {"single_device", {}};
  o.budget = 1;
  o.seed = 11;
  bool any_differs = false;
  for (double sigma : {0.0, 0.8}) {
    o.model_error = sigma;
    const OptimizeResult r = optimize(truth, registry(), o);
    const sim::Simulator model = sim::with_model_error(truth, sigma, ~o.seed);
    for (const char* name : {"list_scheduling", "metis", "scotch"}) {
      const BaselinePlacement planned =
          place_baseline(name, model, registry(), each_op, o.seed, &truth);
      ASSERT_TRUE(r.baselines.at(name)) << name;
      EXPECT_EQ(*r.baselines.at(name), planned.step_time_s) << name << " at sigma " << sigma;
      if (sigma > 0)
        any_differs |= planned.step_time_s !=
                       place_baseline(name, truth, registry(), each_op, o.seed).step_time_s;
    }
  }
  EXPECT_TRUE(any_differs) << "a model 80% off changes some heuristic's placement";
}

// The winner's curse on BERT: warm-started by the simulator search, the policy samples 100
// candidates within 0.2–0.6% of each other under 2% measurement noise. The lowest measurement is a
// lucky one; corrected by the planning model, the pick is never slower and on some seed faster.
TEST(Optimize, TheModelAssistedPickIsNoSlowerThanTheLowestMeasurement) {
  if (!registry().has(placement::PluginKind::kPlacer, "feedforward"))
    GTEST_SKIP() << "built without LibTorch";
  // The bench's BERT: the papers' batch, timed by the cost model.
  const placement::OpGraph g =
      placement::load_graph_file(GRAPH_DIR "/papers/bert_base_mlm_bs24.json.gz");
  const sim::Simulator simulator(g, sim::load_topology(TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml"));
  OptimizeOptions o;
  o.grouper = {"colocation", {}};
  o.placer = {"feedforward", {}};
  o.algorithm = {"post", {}};
  o.budget = 100;
  o.imitation.baseline = "simulator";
  o.baselines.clear();
  double gained = 0.0;
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    o.selection = OptimizeOptions::Selection::kMeasured;
    const OptimizeResult measured = optimize(simulator, registry(), o);
    o.selection = OptimizeOptions::Selection::kModelAssisted;
    const OptimizeResult assisted = optimize(simulator, registry(), o);
    ASSERT_TRUE(measured.policy_best_s && assisted.policy_best_s);
    EXPECT_FALSE(measured.estimated_model_error);
    ASSERT_TRUE(assisted.estimated_model_error) << "seed " << seed;
    EXPECT_LE(*assisted.policy_best_s, *measured.policy_best_s) << "seed " << seed;
    EXPECT_DOUBLE_EQ(simulator.simulate(assisted.best).step_time_s, *assisted.policy_best_s)
        << "the reported placement is the one picked";
    gained += *measured.policy_best_s - *assisted.policy_best_s;
  }
  EXPECT_GT(gained, 0.0);
}

}  // namespace
}  // namespace placementd::offline
