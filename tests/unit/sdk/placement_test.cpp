#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "placement/placement.h"
#include "test_graphs.h"

namespace placement {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Placement, ExpandsGroupsToOps) {
  Grouping grouping{{0, 0, 1, 1, 2}, 3};
  const Placement p = Placement::from_groups(grouping, {1, 0, 1});
  EXPECT_EQ(p.device_of_op, (std::vector<int>{1, 1, 0, 0, 1}));
  EXPECT_EQ(p.ops_per_device(2), (std::vector<int>{2, 3}));
  EXPECT_THROW(Placement::from_groups(grouping, {0, 1}), std::invalid_argument);
}

TEST(Placement, PinnedOpsMustStayOnTheirKind) {
  OpGraph g = testing::chain(3);
  g.ops[1].pinned = DeviceKind::kCpu;
  DeviceSet d = DeviceSet::uniform(
      {{DeviceKind::kCuda, 0, 1 << 20, 1.0}, {DeviceKind::kCpu, 0, 1 << 20, 1.0}}, 1e9, 0);
  Placement p = Placement::single(g, 0);
  EXPECT_THROW(p.validate(g, d), std::invalid_argument);
  EXPECT_EQ(p.enforce_pins(g, d), 1);
  EXPECT_EQ(p.device_of_op, (std::vector<int>{0, 1, 0}));
  EXPECT_NO_THROW(p.validate(g, d));
}

TEST(Placement, PinToAMissingKindIsAnError) {
  OpGraph g = testing::chain(2);
  g.ops[0].pinned = DeviceKind::kCuda;
  Placement p = Placement::single(g, 0);
  EXPECT_THROW(p.enforce_pins(g, testing::devices(2)), std::invalid_argument);
}

TEST(Placement, ValidateRejectsUnknownDeviceAndWrongSize) {
  const OpGraph g = testing::chain(3);
  const DeviceSet d = testing::devices(2);
  EXPECT_THROW((Placement{{0, 2, 1}}).validate(g, d), std::invalid_argument);
  EXPECT_THROW((Placement{{0, 1}}).validate(g, d), std::invalid_argument);
  EXPECT_NE((Placement{{0, 1, 1}}).fingerprint(), (Placement{{1, 1, 0}}).fingerprint());
}

TEST(Placement, AResidenceIsCheckedAgainstTheGraphAndTheDevices) {
  OpGraph g = testing::chain(3);
  g.parameters = {{"a.weight", 64, {0}}, {"b.weight", 64, {1, 2}}};
  const DeviceSet d = testing::devices(2);
  Placement p{{0, 0, 1}};
  EXPECT_NO_THROW(p.validate(g, d));
  EXPECT_EQ(p.home_of_parameter(g, 1), 0) << "by default, its first reader's device";
  p.residence.parameters = {{}, {1, Fetch::kStream}};
  EXPECT_NO_THROW(p.validate(g, d));
  EXPECT_EQ(p.home_of_parameter(g, 1), 1);
  p.residence.parameters[0].home = 5;
  EXPECT_EQ(message_of([&] { p.validate(g, d); }),
            "parameter 0 'a.weight' has its home on device index 5, outside [0, 2)");
  p.residence.parameters = {{}};
  EXPECT_EQ(message_of([&] { p.validate(g, d); }), "residence names 1 parameters, graph has 2");
  p.residence.parameters.clear();
  p.residence.activations = {{ActivationPolicy::kOffload, 0}, {}, {}};
  EXPECT_EQ(message_of([&] { p.validate(g, d); }),
            "op 0 'layer.0' offloads its outputs to cpu:0, the device it runs on");
  p.residence.activations[0] = {ActivationPolicy::kRecompute, 1};
  EXPECT_EQ(message_of([&] { p.validate(g, d); }),
            "op 0 'layer.0': only an offloaded activation names a device");
  // Carried to a placement that runs op 2 on cpu:0, an offload to cpu:0 becomes a keep.
  Residence r;
  r.activations = {{}, {}, {ActivationPolicy::kOffload, 0}};
  EXPECT_EQ(r.carried_to({0, 0, 1}).activations[2].policy, ActivationPolicy::kOffload);
  EXPECT_EQ(r.carried_to({0, 0, 0}).activations[2].policy, ActivationPolicy::kKeep);
}

TEST(Placement, ADefaultResidenceIsNoResidenceWhateverItsSpelling) {
  Placement a{{0, 1}}, b{{0, 1}};
  b.residence.parameters.resize(3);
  b.residence.activations.resize(2);
  EXPECT_TRUE(b.residence.is_default());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  b.residence.parameters[2].fetch = Fetch::kStream;
  EXPECT_NE(a, b);
  EXPECT_NE(a.fingerprint(), b.fingerprint());
}

TEST(ResidenceRules, TheLongestModulePrefixDecides) {
  OpGraph g = testing::chain(4);
  g.ops[0].name = "embed/embedding";
  g.ops[1].name = "layers.0/linear";
  g.ops[2].name = "layers.1/linear";
  g.ops[3].name = "layers.10/linear";
  g.parameters = {{"embed.weight", 8, {0}},
                  {"layers.0.weight", 8, {1}},
                  {"layers.1.weight", 8, {2}},
                  {"layers.10.weight", 8, {3}}};
  ResidenceRules rules;
  rules.parameters[""] = {1, Fetch::kPersist};
  rules.parameters["layers.1"] = {1, Fetch::kStream};
  rules.activations["layers"] = {ActivationPolicy::kRecompute, -1};
  rules.activations["layers.0"] = {};
  const Residence r = rules.resolve(g);
  ASSERT_EQ(r.parameters.size(), 4u);
  EXPECT_EQ(r.parameters[0].fetch, Fetch::kPersist);
  EXPECT_EQ(r.parameters[2].fetch, Fetch::kStream);
  EXPECT_EQ(r.parameters[3].fetch, Fetch::kPersist) << "layers.10 is not inside layers.1";
  EXPECT_EQ(r.activations[0].policy, ActivationPolicy::kKeep);
  EXPECT_EQ(r.activations[1].policy, ActivationPolicy::kKeep) << "layers.0 is longer than layers";
  EXPECT_EQ(r.activations[2].policy, ActivationPolicy::kRecompute);
  EXPECT_EQ(r.activations[3].policy, ActivationPolicy::kRecompute);
  EXPECT_TRUE(ResidenceRules{}.resolve(g).is_default());
}

TEST(ResidenceRules, ARecomputeCheckpointsItsModuleKeepingWhatLeavesIt) {
  // Two blocks of two ops each, then a head: layers.0/a -> layers.0/b -> layers.1/a -> layers.1/b
  // -> head.
  OpGraph g = testing::chain(5);
  const char* names[] = {"layers.0/a", "layers.0/b", "layers.1/a", "layers.1/b", "head/linear"};
  for (int i = 0; i < 5; ++i) g.ops[i].name = names[i];
  const auto policies = [&](const ResidenceRules& rules) {
    std::vector<ActivationPolicy> out;
    for (const ActivationResidence& a : rules.resolve(g).activations) out.push_back(a.policy);
    return out;
  };
  const auto K = ActivationPolicy::kKeep, R = ActivationPolicy::kRecompute;
  ResidenceRules whole;
  whole.activations["layers"] = {R, -1};
  // One region: only the output that leaves it (to the head) is kept.
  EXPECT_EQ(policies(whole), (std::vector<ActivationPolicy>{R, R, R, K, K}));
  ResidenceRules each;
  each.activations["layers.*"] = {R, -1};
  // A region per block: each block keeps what it hands on.
  EXPECT_EQ(policies(each), (std::vector<ActivationPolicy>{R, K, R, K, K}));
  ResidenceRules everything;
  everything.activations["*"] = {R, -1};
  // Each top-level module a region ("layers" whole, "head"); the head's output is the program's,
  // which the engine keeps whatever its policy.
  EXPECT_EQ(policies(everything), (std::vector<ActivationPolicy>{R, R, R, K, R}));
}

TEST(Grouping, ValidatesAndListsMembers) {
  const OpGraph g = testing::chain(4);
  Grouping grouping{{1, 0, 1, 0}, 2};
  EXPECT_NO_THROW(grouping.validate(g));
  EXPECT_EQ(grouping.members()[1], (std::vector<int>{0, 2}));
  grouping.group_of_op[3] = 2;
  EXPECT_THROW(grouping.validate(g), std::invalid_argument);
}

}  // namespace
}  // namespace placement
