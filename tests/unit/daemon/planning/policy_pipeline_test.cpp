// The grouper → placer chain with the Hierarchical Planner's learned grouper: the joint policy is a
// distribution over (grouping, placement), its log-probability is the sum of both networks', and
// it learns from the reward like a placer alone does.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "built_plugins.h"
#include "planning/offline/optimize.h"
#include "planning/policy_pipeline.h"
#include "test_graphs.h"

namespace placementd {
namespace {

using placement::Action;
using placement::DeviceKind;

class LearnedGrouping : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!offline::built_plugins().has(placement::PluginKind::kGrouper, "feedforward"))
      GTEST_SKIP() << "learned plugins not built (no LibTorch)";
  }
  std::unique_ptr<placement::Grouper> grouper(int64_t groups) {
    return offline::built_plugins().create_grouper("feedforward", {{"groups", groups}});
  }
  std::unique_ptr<placement::Placer> placer() {
    return offline::built_plugins().create_placer("feedforward", {});
  }
};

TEST_F(LearnedGrouping, TheJointPolicyIsADistributionOverGroupingsAndPlacements) {
  // 3 ops, 2 groups, 2 devices: 2^3 groupings × 2^2 placements = 32 actions, Σ π = 1.
  const placement::OpGraph g = placement::testing::chain(3);
  const placement::DeviceSet d = placement::testing::devices(2);
  auto gr = grouper(2);
  auto pl = placer();
  std::mt19937_64 rng(4);
  PolicyPipeline pipeline(*gr, *pl, g, d, rng);
  ASSERT_TRUE(pipeline.learned_grouping());
  placement::TrainablePolicy* joint = pipeline.policy();
  ASSERT_NE(joint, nullptr);
  EXPECT_NE(joint, pl->policy()) << "the algorithm trains both networks, not the placer alone";
  double total = 0;
  for (int grouping = 0; grouping < 8; ++grouping)
    for (int devices = 0; devices < 4; ++devices)
      total += std::exp(joint->log_prob(
          {grouping & 1, (grouping >> 1) & 1, (grouping >> 2) & 1, devices & 1, devices >> 1}));
  EXPECT_NEAR(total, 1.0, 1e-5);
  // log π(g, p) = log π_G(g) + log π_P(p | g), the placer scored on that grouping's features.
  const Action a{0, 1, 1, 1, 0};
  const double joint_lp = joint->log_prob(a);
  const double grouper_lp = gr->policy()->log_prob({0, 1, 1});
  pl->prepare(g, placement::Grouping{{0, 1, 1}, 2}, d, rng);
  EXPECT_NEAR(joint_lp, grouper_lp + pl->policy()->log_prob({1, 0}), 1e-9);
}

TEST_F(LearnedGrouping, EverySampleRegroupsAndItsPlacementFollowsTheGroups) {
  const placement::OpGraph g = placement::testing::chain(12);
  const placement::DeviceSet d = placement::testing::devices(2);
  auto gr = grouper(4);
  auto pl = placer();
  std::mt19937_64 rng(2);
  PolicyPipeline pipeline(*gr, *pl, g, d, rng);
  std::set<std::vector<int>> groupings;
  for (int i = 0; i < 5; ++i) {
    const PolicyPipeline::Sample s = pipeline.sample(rng);
    ASSERT_EQ(s.action.size(), 12u + 4u) << "grouping of each op, then a device per group";
    const std::vector<int> group_of_op(s.action.begin(), s.action.begin() + 12);
    EXPECT_EQ(pipeline.grouping().group_of_op, group_of_op);
    EXPECT_EQ(pipeline.grouping().num_groups, 4);
    for (int op = 0; op < 12; ++op)
      EXPECT_EQ(s.placement.device_of_op[op], s.action[12 + group_of_op[op]]);
    groupings.insert(group_of_op);
  }
  EXPECT_GT(groupings.size(), 1u) << "a learned grouper samples a grouping per candidate";
  // The state covers both networks and refuses anything else.
  const std::string state = pipeline.policy()->save_state();
  EXPECT_NO_THROW(pipeline.policy()->load_state(state));
  EXPECT_THROW(pipeline.policy()->load_state("garbage"), std::invalid_argument);
  EXPECT_THROW(pipeline.policy()->load_state("joint:99999:x"), std::invalid_argument);

  // A grouper's state that reads and a placer's that does not: refused whole, nothing changes.
  const Action a = pipeline.sample(rng).action;
  for (int i = 0; i < 3; ++i) {
    pipeline.policy()->accumulate_gradient({a}, {1.0}, 0.0);
    pipeline.policy()->apply_gradient({0.05, 1.0});
  }
  const std::string trained = pipeline.policy()->save_state();
  const std::string grouper_part = trained.substr(0, trained.size() - 64);
  auto gr2 = grouper(4), gr3 = grouper(4);
  auto pl2 = placer(), pl3 = placer();
  std::mt19937_64 rng2(2), rng3(2);
  PolicyPipeline fresh(*gr2, *pl2, g, d, rng2), control(*gr3, *pl3, g, d, rng3);
  const double before = fresh.policy()->log_prob(a);
  EXPECT_THROW(fresh.policy()->load_state(grouper_part + "not the placer's state"),
               std::invalid_argument);
  EXPECT_EQ(fresh.policy()->log_prob(a), before) << "the grouper's half was not kept";
  // Nor its optimiser's moments: a step moves `fresh` as it moves an untouched twin.
  for (PolicyPipeline* p : {&fresh, &control}) {
    p->policy()->accumulate_gradient({a}, {1.0}, 0.0);
    p->policy()->apply_gradient({0.05, 1.0});
  }
  EXPECT_EQ(fresh.policy()->log_prob(a), control.policy()->log_prob(a));
  fresh.policy()->load_state(trained);
  EXPECT_NE(fresh.policy()->log_prob(a), before);
}

// [policy] max_groups: a fixed grouper's groups are merged down to it; a learned grouper's
// groupings are its actions, so one that makes more is refused with the key to change.
TEST(PolicyPipeline, HoldsEveryGrouperToMaxGroups) {
  const placement::OpGraph g = placement::testing::chain(600);
  const placement::DeviceSet d = placement::testing::devices(2);
  auto none = offline::built_plugins().create_grouper("none", {});
  auto pl = offline::built_plugins().create_placer("single_device", {});
  std::mt19937_64 rng(1);
  PolicyPipeline capped(*none, *pl, g, d, rng, 256);
  EXPECT_EQ(capped.grouping().num_groups, 256);
  const PolicyPipeline::Sample s = capped.sample(rng);
  EXPECT_EQ(s.placement.device_of_op.size(), 600u);
  PolicyPipeline wide(*none, *pl, g, d, rng, 1000);
  EXPECT_EQ(wide.grouping().num_groups, 600) << "a cap above the group count changes nothing";

  if (!offline::built_plugins().has(placement::PluginKind::kGrouper, "feedforward"))
    GTEST_SKIP() << "the learned grouper is not built (no LibTorch)";
  auto learned = offline::built_plugins().create_grouper("feedforward", {{"groups", int64_t{64}}});
  auto ff = offline::built_plugins().create_placer("feedforward", {});
  try {
    PolicyPipeline refused(*learned, *ff, g, d, rng, 32);
    FAIL() << "a learned grouper over the cap was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(
        e.what(),
        "the learned grouper made 64 groups, more than [policy] max_groups = 32: lower its groups "
        "hyperparameter");
  }
}

// EAGLE's pairing (learned grouper trained jointly, PPO) with the feed-forward placer. With
// REINFORCE instead, the joint policy settles early on a 24 ms placement on every one of 5 seeds
// (the EMA baseline starts at the failing reward, so the first samples are all reinforced);
// PPO reaches the optimum on all 5.
TEST_F(LearnedGrouping, JointlyTrainedGrouperAndPlacerSplitTwoIndependentChains) {
  placement::OpGraph g = placement::testing::two_chains(6);
  placement::testing::profile_all(g, DeviceKind::kCuda, 1e-3);
  const sim::Simulator simulator(g, placement::testing::devices(2, DeviceKind::kCuda));
  const double split =
      simulator.simulate(placement::Placement{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}).step_time_s;
  offline::OptimizeOptions o;
  o.grouper = {"feedforward", {{"groups", int64_t{4}}}};
  o.placer = {"feedforward", {}};
  o.algorithm = {"ppo", {}};
  o.budget = 400;
  o.seed = 3;
  const offline::OptimizeResult r = offline::optimize(simulator, offline::built_plugins(), o);

  ASSERT_TRUE(r.policy_best_s);
  EXPECT_LE(*r.policy_best_s, split * 1.02) << "optimum " << split << " s";
}

}  // namespace
}  // namespace placementd
