#include <gtest/gtest.h>

#include "placement/placement.h"
#include "test_graphs.h"

namespace placement {
namespace {

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
