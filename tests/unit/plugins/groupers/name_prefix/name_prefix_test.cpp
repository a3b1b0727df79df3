#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "name_prefix.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

std::mt19937_64 rng(1);

TEST(NamePrefix, LevelsKeepContainerIndicesWithTheirLevel) {
  EXPECT_EQ(NamePrefixGrouper::levels_of("encoder.layers.0.self_attn/linear.1"),
            (std::vector<std::string>{"encoder", "layers.0", "self_attn", "linear.1"}));
  EXPECT_EQ(NamePrefixGrouper::levels_of("left.0.0/linear"),
            (std::vector<std::string>{"left.0.0", "linear"}));
  EXPECT_EQ(NamePrefixGrouper::levels_of("cat"), (std::vector<std::string>{"cat"}));
}

TEST(NamePrefix, OpsOfOneLayerShareAGroup) {
  OpGraph g = testing::chain(0);
  for (const char* name :
       {"encoder.layers.0.self_attn/linear", "encoder.layers.0.self_attn/softmax",
        "encoder.layers.0.norm1/layer_norm", "encoder.layers.1.self_attn/linear", "pool/linear"})
    g.ops.push_back({static_cast<int>(g.ops.size()), name, "aten::x", {}, 0, {}, {}});
  const Grouping two = NamePrefixGrouper(NamePrefixOptions{2}).group(g, testing::devices(2), rng);
  EXPECT_EQ(two.group_of_op, (std::vector<int>{0, 0, 0, 1, 2}));
  const Grouping three = NamePrefixGrouper(NamePrefixOptions{3}).group(g, testing::devices(2), rng);
  EXPECT_EQ(three.group_of_op, (std::vector<int>{0, 0, 1, 2, 3}));
  g.ops[1].pinned = DeviceKind::kCpu;
  EXPECT_NE(
      NamePrefixGrouper(NamePrefixOptions{2}).group(g, testing::devices(2), rng).group_of_op[1], 0)
      << "pinned ops stay apart";
}

}  // namespace
}  // namespace placement::plugins
