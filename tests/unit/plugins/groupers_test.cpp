#include <gtest/gtest.h>

#include <set>

#include "metis_grouper.h"
#include "name_prefix.h"
#include "none.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

std::mt19937_64 rng(1);

TEST(NoGrouper, EveryOpAlone) {
  const OpGraph g = testing::chain(5);
  const Grouping grouping = NoGrouper().group(g, testing::devices(2), rng);
  EXPECT_EQ(grouping.num_groups, 5);
  EXPECT_NO_THROW(grouping.validate(g));
}

TEST(NamePrefix, LevelsKeepContainerIndicesWithTheirLevel) {
  EXPECT_EQ(NamePrefixGrouper::levels_of("encoder.layers.0.self_attn/linear.1"),
            (std::vector<std::string>{"encoder", "layers.0", "self_attn", "linear.1"}));
  EXPECT_EQ(NamePrefixGrouper::levels_of("left.0.0/linear"), (std::vector<std::string>{"left.0.0", "linear"}));
  EXPECT_EQ(NamePrefixGrouper::levels_of("cat"), (std::vector<std::string>{"cat"}));
}

TEST(NamePrefix, OpsOfOneLayerShareAGroup) {
  OpGraph g = testing::chain(0);
  for (const char* name : {"encoder.layers.0.self_attn/linear", "encoder.layers.0.self_attn/softmax",
                           "encoder.layers.0.norm1/layer_norm", "encoder.layers.1.self_attn/linear", "pool/linear"})
    g.ops.push_back({static_cast<int>(g.ops.size()), name, "aten::x", {}, 0, {}, {}});
  const Grouping two = NamePrefixGrouper(2).group(g, testing::devices(2), rng);
  EXPECT_EQ(two.group_of_op, (std::vector<int>{0, 0, 0, 1, 2}));
  const Grouping three = NamePrefixGrouper(3).group(g, testing::devices(2), rng);
  EXPECT_EQ(three.group_of_op, (std::vector<int>{0, 0, 1, 2, 3}));
  g.ops[1].pinned = DeviceKind::kCpu;
  EXPECT_NE(NamePrefixGrouper(2).group(g, testing::devices(2), rng).group_of_op[1], 0) << "pinned ops stay apart";
}

TEST(Metis, CutsTheCheapEdgesAndIsDeterministic) {
  // Two heavy chains joined by one light edge: two groups must be the two chains.
  OpGraph g = testing::two_chains(6);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the only cheap edge
  const Grouping grouping = MetisGrouper(2, 0.5, 1).group(g, testing::devices(2), rng);
  ASSERT_EQ(grouping.num_groups, 2);
  std::set<int> first(grouping.group_of_op.begin(), grouping.group_of_op.begin() + 6);
  std::set<int> second(grouping.group_of_op.begin() + 6, grouping.group_of_op.begin() + 12);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin());
  EXPECT_EQ(grouping.group_of_op[12], *first.begin()) << "the join stays with the chain it is heavily tied to";
  EXPECT_EQ(MetisGrouper(2, 0.5, 1).group(g, testing::devices(2), rng), grouping);
}

TEST(Metis, GroupCountIsCappedAndDense) {
  const OpGraph g = testing::chain(10);
  const Grouping all = MetisGrouper(256, 0.03, 1).group(g, testing::devices(2), rng);
  EXPECT_LE(all.num_groups, 10);
  EXPECT_NO_THROW(all.validate(g));
  std::set<int> used(all.group_of_op.begin(), all.group_of_op.end());
  EXPECT_EQ(static_cast<int>(used.size()), all.num_groups) << "no empty groups";
  EXPECT_EQ(MetisGrouper(1, 0.03, 1).group(g, testing::devices(2), rng).num_groups, 1);
}

}  // namespace
}  // namespace placement::plugins
