#include <gtest/gtest.h>

#include <set>

#include "metis_grouper.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

std::mt19937_64 rng(1);

TEST(Metis, CutsTheCheapEdgesAndIsDeterministic) {
  // Two heavy chains joined by one light edge: two groups must be the two chains.
  OpGraph g = testing::two_chains(6);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the only cheap edge
  const Grouping grouping =
      MetisGrouper(MetisGrouperOptions{2, 0.5, 1}).group(g, testing::devices(2), rng);
  ASSERT_EQ(grouping.num_groups, 2);
  std::set<int> first(grouping.group_of_op.begin(), grouping.group_of_op.begin() + 6);
  std::set<int> second(grouping.group_of_op.begin() + 6, grouping.group_of_op.begin() + 12);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin());
  EXPECT_EQ(grouping.group_of_op[12], *first.begin())
      << "the join stays with the chain it is heavily tied to";
  EXPECT_EQ(MetisGrouper(MetisGrouperOptions{2, 0.5, 1}).group(g, testing::devices(2), rng),
            grouping);
}

TEST(Metis, GroupCountIsCappedAndDense) {
  const OpGraph g = testing::chain(10);
  const Grouping all =
      MetisGrouper(MetisGrouperOptions{256, 0.03, 1}).group(g, testing::devices(2), rng);
  EXPECT_LE(all.num_groups, 10);
  EXPECT_NO_THROW(all.validate(g));
  std::set<int> used(all.group_of_op.begin(), all.group_of_op.end());
  EXPECT_EQ(static_cast<int>(used.size()), all.num_groups) << "no empty groups";
  EXPECT_EQ(
      MetisGrouper(MetisGrouperOptions{1, 0.03, 1}).group(g, testing::devices(2), rng).num_groups,
      1);
}

}  // namespace
}  // namespace placement::plugins
