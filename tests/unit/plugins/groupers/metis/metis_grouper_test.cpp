#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "metis_grouper.h"
#include "metis_partition.h"
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

// A graph cut into nearly as many parts as it has vertices, every seventh of them heavy: METIS
// bisects empty subproblems on the way and prints "***Cannot bisect a graph with 0 vertices!" on
// stdout (nine times here), where placementctl writes its output. None of it reaches stdout; the
// partition is whole.
TEST(Metis, WhatMetisPrintsNeverReachesStdout) {
  WeightedGraph graph;
  for (int v = 0; v < 60; ++v) {
    graph.vertex_weight.push_back(v % 7 == 0 ? 1000.0 : 1.0);
    if (v % 3 != 0) graph.links.push_back({v - 1, v, 1.0});
  }
  ::testing::internal::CaptureStdout();
  const std::vector<int> part = metis_partition(graph, 50, 0.05, 1);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed, "");
  ASSERT_EQ(part.size(), 60u);
  const int parts = *std::max_element(part.begin(), part.end()) + 1;
  EXPECT_LE(parts, 50);
  EXPECT_EQ(std::set<int>(part.begin(), part.end()).size(), static_cast<size_t>(parts)) << "dense";
  // stdout is the process's again: what is printed after it goes where it went before.
  ::testing::internal::CaptureStdout();
  std::printf("after\n");
  std::fflush(stdout);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "after\n");
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
