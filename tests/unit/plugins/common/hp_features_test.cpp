#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hp_features.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

TEST(HpFeatures, VocabularyIsTheMostFrequentKindsAndTheRestAreOther) {
  OpGraph g = testing::two_chains(3);  // 6 × aten::linear, 1 × aten::add
  const OpFeatures f = op_features(g, 1);
  ASSERT_EQ(f.vocabulary, std::vector<std::string>{"aten::linear"});
  EXPECT_EQ(f.vocabulary_size(), 2);
  EXPECT_EQ(f.kind[0], 0);
  EXPECT_EQ(f.kind[6], 1) << "the join is 'other'";
}

TEST(HpFeatures, ShapesAndAdjacencyArePaddedWithMinusOne) {
  const OpGraph g = testing::chain(3, 4096);  // outputs of shape [1024]
  const OpFeatures f = op_features(g, 8);
  const float* row = &f.numeric[static_cast<size_t>(1) * OpFeatures::kNumericWidth];
  EXPECT_FLOAT_EQ(row[0], std::log1p(1024.0f));
  EXPECT_FLOAT_EQ(row[1], -1.0f) << "a 1-d shape pads the other 3 dims";
  EXPECT_FLOAT_EQ(row[OpFeatures::kDims], -1.0f) << "a single output pads the other 5";
  const float* adj = row + OpFeatures::kOutputs * OpFeatures::kDims;
  EXPECT_FLOAT_EQ(adj[0], 0.0f) << "producer op 0 is first in BFS order";
  EXPECT_FLOAT_EQ(adj[1], -1.0f);
  EXPECT_FLOAT_EQ(adj[OpFeatures::kNeighbours], 2.0f / 3.0f) << "consumer op 2 is third of 3";
  EXPECT_EQ(f.bfs_position, (std::vector<int>{0, 1, 2}));
}

TEST(HpFeatures, GroupEmbeddingCountsKindsAndTraffic) {
  OpGraph g = testing::two_chains(2);  // towers {0,1} and {2,3}, join 4
  for (auto& op : g.ops) op.profile["cuda"] = {1e-3, 2e-3, 0, 0};
  const Grouping grouping{{0, 0, 1, 1, 2}, 3};
  const OpFeatures ops = op_features(g, 8);
  const GroupFeatures f = group_features(g, grouping, ops);
  const int V = ops.vocabulary_size();
  EXPECT_EQ(f.width, V + GroupFeatures::kShapeWidth + 3 + GroupFeatures::kCostWidth);
  const float* tower0 = &f.rows[0];
  EXPECT_FLOAT_EQ(tower0[0], 2.0f) << "two aten::linear ops";
  EXPECT_FLOAT_EQ(tower0[V + GroupFeatures::kShapeWidth + 2], 1.0f)
      << "all its traffic goes to the join";
  EXPECT_FLOAT_EQ(f.adjacency[2 * 3 + 0], 0.5f) << "the join splits its traffic between the towers";
  EXPECT_FLOAT_EQ(tower0[V + GroupFeatures::kShapeWidth + 3],
                  static_cast<float>(std::log1p(6000.0)))
      << "2 ops × 3 ms of compute, in µs";
}

}  // namespace
}  // namespace placement::plugins
