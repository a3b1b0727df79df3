#include <gtest/gtest.h>

#include "colocation.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

Grouping run(const OpGraph& g, int64_t max_ops = 0) {
  std::mt19937_64 rng(1);
  Grouping grouping =
      ColocationGrouper(ColocationOptions{max_ops}).group(g, testing::devices(2), rng);
  grouping.validate(g);
  return grouping;
}

TEST(Colocation, ChainCollapsesIntoOneGroup) {
  const Grouping grouping = run(testing::chain(6));
  EXPECT_EQ(grouping.num_groups, 1);
}

TEST(Colocation, OpWithSeveralConsumersStaysApart) {
  // a -> b, a -> c, b -> d, c -> d: a has two consumers; b and c have only d.
  OpGraph g = testing::chain(0);
  for (const char* name : {"a", "b", "c", "d"})
    g.ops.push_back({static_cast<int>(g.ops.size()), name, "aten::add", {}, 0, {}, {}});
  g.edges = {{0, 1, 1}, {0, 2, 1}, {1, 3, 1}, {2, 3, 1}};
  const Grouping grouping = run(g);
  EXPECT_EQ(grouping.num_groups, 2);
  EXPECT_EQ(grouping.group_of_op, (std::vector<int>{0, 1, 1, 1}));
}

TEST(Colocation, OpsPinnedToDifferentKindsAreNeverMerged) {
  OpGraph g = testing::chain(4);
  g.ops[1].pinned = DeviceKind::kCpu;
  g.ops[3].pinned = DeviceKind::kCuda;
  const Grouping grouping = run(g);
  EXPECT_NE(grouping.group_of_op[1], grouping.group_of_op[3]);
  EXPECT_EQ(grouping.group_of_op[0], grouping.group_of_op[1]);
}

TEST(Colocation, GroupSizeLimitIsRespected) {
  const Grouping grouping = run(testing::chain(10), 3);
  for (const auto& members : grouping.members()) EXPECT_LE(members.size(), 3u);
  EXPECT_GE(grouping.num_groups, 4);
}

TEST(Colocation, IsDeterministic) {
  const OpGraph g = testing::two_chains(20);
  EXPECT_EQ(run(g, 7), run(g, 7));
}

}  // namespace
}  // namespace placement::plugins
