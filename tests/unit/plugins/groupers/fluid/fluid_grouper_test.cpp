#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "fluid_grouper.h"
#include "test_graphs.h"

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
