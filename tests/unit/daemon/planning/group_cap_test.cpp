// [policy] max_groups: a grouping with more groups is merged into at most that many runs of
// consecutive groups, in topological order, of about equal op counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "planning/group_cap.h"
#include "test_graphs.h"

namespace placementd {
namespace {

placement::Grouping each_op(const placement::OpGraph& g) {
  placement::Grouping grouping;
  for (size_t i = 0; i < g.ops.size(); ++i) grouping.group_of_op.push_back(static_cast<int>(i));
  grouping.num_groups = static_cast<int>(g.ops.size());
  return grouping;
}

TEST(GroupCap, AGroupingWithinTheCapIsUnchanged) {
  const placement::OpGraph g = placement::testing::chain(10);
  const placement::Grouping grouping = each_op(g);
  const placement::Grouping capped = cap_groups(g, grouping, 10);
  EXPECT_EQ(capped.group_of_op, grouping.group_of_op);
  EXPECT_EQ(capped.num_groups, 10);
  EXPECT_THROW(cap_groups(g, grouping, 0), std::invalid_argument);
}

TEST(GroupCap, AnEmptyGroupNeverMakesOneTooMany) {
  const placement::OpGraph g = placement::testing::chain(1000);
  placement::Grouping grouping = each_op(g);
  grouping.num_groups = 1001;  // group 1000 holds no op
  const placement::Grouping capped = cap_groups(g, grouping, 256);
  capped.validate(g);
  EXPECT_LE(capped.num_groups, 256);
}

TEST(GroupCap, AChainIsCutIntoEqualRunsOfConsecutiveOps) {
  const placement::OpGraph g = placement::testing::chain(1000);
  const placement::Grouping capped = cap_groups(g, each_op(g), 256);
  capped.validate(g);
  EXPECT_EQ(capped.num_groups, 256);
  std::map<int, int> size;
  for (size_t op = 0; op < g.ops.size(); ++op) {
    ++size[capped.group_of_op[op]];
    if (op > 0) {
      EXPECT_GE(capped.group_of_op[op], capped.group_of_op[op - 1]) << "runs follow the chain";
    }
  }
  for (const auto& [group, ops] : size) {
    EXPECT_GE(ops, 3) << "group " << group;
    EXPECT_LE(ops, 4) << "group " << group;
  }
}

// Colocation's grouping of an unrolled stack: the top layer is one long group, every other cell
// its own. Merging keeps each old group whole, and every merged group spans one stretch of steps.
TEST(GroupCap, GroupsStayWholeAndMergedGroupsAreStretchesOfTheGraph) {
  const placement::OpGraph g = placement::testing::unrolled_stack(4000);
  placement::Grouping colocated;
  colocated.group_of_op.assign(g.ops.size(), -1);
  for (size_t op = 0; op < g.ops.size(); ++op)
    colocated.group_of_op[op] = op % 4 == 3 ? 0 : static_cast<int>(op) + 1;
  std::set<int> ids(colocated.group_of_op.begin(), colocated.group_of_op.end());
  std::map<int, int> dense;
  for (int id : ids) dense.emplace(id, static_cast<int>(dense.size()));
  for (int& id : colocated.group_of_op) id = dense[id];
  colocated.num_groups = static_cast<int>(dense.size());
  ASSERT_EQ(colocated.num_groups, 3001);

  const placement::Grouping capped = cap_groups(g, colocated, 64);
  capped.validate(g);
  EXPECT_LE(capped.num_groups, 64);
  EXPECT_GE(capped.num_groups, 32) << "the cap is used, not collapsed into a few groups";
  std::map<int, int> merged_of;
  std::map<int, std::pair<size_t, size_t>> steps;  // merged group -> first and last step it holds
  for (size_t op = 0; op < g.ops.size(); ++op) {
    const auto [it, fresh] = merged_of.emplace(colocated.group_of_op[op], capped.group_of_op[op]);
    EXPECT_EQ(it->second, capped.group_of_op[op]) << "an old group is split at op " << op;
    if (op % 4 == 3) continue;  // the top layer's group spans every step
    auto [range, added] = steps.emplace(capped.group_of_op[op], std::make_pair(op / 4, op / 4));
    range->second.first = std::min(range->second.first, op / 4);
    range->second.second = std::max(range->second.second, op / 4);
  }
  // Stretches of steps: the topological order runs along the grid's wavefronts (step t of layer l
  // next to step t - 1 of layer l + 1), so neighbouring ranges share at most the 2 steps a
  // wavefront spans below the top layer.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [group, range] : steps) ranges.push_back(range);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_GE(ranges[i].first + 2, ranges[i - 1].second);
}

}  // namespace
}  // namespace placementd
