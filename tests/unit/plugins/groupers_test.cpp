#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "fluid_grouper.h"
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
  const Grouping two = NamePrefixGrouper(NamePrefixOptions{2}).group(g, testing::devices(2), rng);
  EXPECT_EQ(two.group_of_op, (std::vector<int>{0, 0, 0, 1, 2}));
  const Grouping three = NamePrefixGrouper(NamePrefixOptions{3}).group(g, testing::devices(2), rng);
  EXPECT_EQ(three.group_of_op, (std::vector<int>{0, 0, 1, 2, 3}));
  g.ops[1].pinned = DeviceKind::kCpu;
  EXPECT_NE(NamePrefixGrouper(NamePrefixOptions{2}).group(g, testing::devices(2), rng).group_of_op[1], 0) << "pinned ops stay apart";
}

TEST(Metis, CutsTheCheapEdgesAndIsDeterministic) {
  // Two heavy chains joined by one light edge: two groups must be the two chains.
  OpGraph g = testing::two_chains(6);
  for (auto& e : g.edges) e.bytes = 1 << 30;
  g.edges.back().bytes = 1;  // chain 1 -> join: the only cheap edge
  const Grouping grouping = MetisGrouper(MetisGrouperOptions{2, 0.5, 1}).group(g, testing::devices(2), rng);
  ASSERT_EQ(grouping.num_groups, 2);
  std::set<int> first(grouping.group_of_op.begin(), grouping.group_of_op.begin() + 6);
  std::set<int> second(grouping.group_of_op.begin() + 6, grouping.group_of_op.begin() + 12);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(second.size(), 1u);
  EXPECT_NE(*first.begin(), *second.begin());
  EXPECT_EQ(grouping.group_of_op[12], *first.begin()) << "the join stays with the chain it is heavily tied to";
  EXPECT_EQ(MetisGrouper(MetisGrouperOptions{2, 0.5, 1}).group(g, testing::devices(2), rng), grouping);
}

TEST(Metis, GroupCountIsCappedAndDense) {
  const OpGraph g = testing::chain(10);
  const Grouping all = MetisGrouper(MetisGrouperOptions{256, 0.03, 1}).group(g, testing::devices(2), rng);
  EXPECT_LE(all.num_groups, 10);
  EXPECT_NO_THROW(all.validate(g));
  std::set<int> used(all.group_of_op.begin(), all.group_of_op.end());
  EXPECT_EQ(static_cast<int>(used.size()), all.num_groups) << "no empty groups";
  EXPECT_EQ(MetisGrouper(MetisGrouperOptions{1, 0.03, 1}).group(g, testing::devices(2), rng).num_groups, 1);
}

}  // namespace
}  // namespace placement::plugins

namespace placement::plugins {
namespace {

// Two 20-op cliques joined by a single edge: fluid communities with k = 2 find them.
std::vector<std::vector<int>> two_cliques() {
  std::vector<std::vector<int>> n(40);
  for (int block = 0; block < 2; ++block)
    for (int a = 0; a < 20; ++a)
      for (int b = 0; b < 20; ++b)
        if (a != b) n[block * 20 + a].push_back(block * 20 + b);
  n[19].push_back(20);
  n[20].push_back(19);
  return n;
}

TEST(Fluid, FindsTwoCliquesJoinedByOneEdge) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<int> c = FluidGrouper::communities(two_cliques(), 2, 100, rng);
    EXPECT_EQ(std::set<int>(c.begin(), c.begin() + 20).size(), 1u) << "seed " << seed;
    EXPECT_EQ(std::set<int>(c.begin() + 20, c.end()).size(), 1u) << "seed " << seed;
    EXPECT_NE(c[0], c[20]) << "seed " << seed;
  }
}

TEST(Fluid, EveryOpGetsADenseGroupAndComponentsShareTheCount) {
  // A 2000-op chain (communities reach its far ends only after many sweeps) and a separate 500-op
  // chain: 10 communities split 8 + 2, every op assigned even with 3 sweeps only.
  std::vector<std::vector<int>> n(2500);
  for (int i = 0; i + 1 < 2500; ++i)
    if (i != 1999) {
      n[i].push_back(i + 1);
      n[i + 1].push_back(i);
    }
  std::mt19937_64 rng(3);
  const std::vector<int> c = FluidGrouper::communities(n, 10, 3, rng);
  EXPECT_EQ(*std::min_element(c.begin(), c.end()), 0);
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 9);
  EXPECT_EQ(std::set<int>(c.begin(), c.begin() + 2000).size(), 8u);
  EXPECT_EQ(std::set<int>(c.begin() + 2000, c.end()).size(), 2u);
  for (int i = 0; i + 1 < 2000; ++i) {
    // Fluid communities are connected: along a chain each community is one contiguous run.
    if (c[i] != c[i + 1]) {
      EXPECT_EQ(std::count(c.begin() + i + 1, c.begin() + 2000, c[i]), 0) << "op " << i;
    }
  }
}

TEST(Fluid, TheGrouperIsRepeatableAndIgnoresTheSessionRng) {
  const OpGraph g = testing::two_chains(30);
  std::mt19937_64 a(1), b(99);
  FluidGrouper grouper(FluidOptions{4, 100, 7});
  const Grouping first = grouper.group(g, testing::devices(2), a);
  EXPECT_EQ(first.num_groups, 4);
  EXPECT_NO_THROW(first.validate(g));
  EXPECT_EQ(grouper.group(g, testing::devices(2), b).group_of_op, first.group_of_op);
  FluidGrouper other_seed(FluidOptions{4, 100, 8});
  EXPECT_NE(other_seed.group(g, testing::devices(2), a).group_of_op, first.group_of_op);
}

}  // namespace
}  // namespace placement::plugins
