#include <gtest/gtest.h>

#include "none.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

TEST(NoGrouper, EveryOpAlone) {
  std::mt19937_64 rng(1);
  const OpGraph g = testing::chain(5);
  const Grouping grouping = NoGrouper().group(g, testing::devices(2), rng);
  EXPECT_EQ(grouping.num_groups, 5);
  EXPECT_NO_THROW(grouping.validate(g));
}

}  // namespace
}  // namespace placement::plugins
