#include <gtest/gtest.h>

#include <stdexcept>

#include "planning/sim/profile_scaling.h"
#include "test_graphs.h"

namespace placementd::sim {
namespace {

TEST(ScaleProfile, GivesEveryProfiledOpAFasterCopyOnTheOtherKind) {
  placement::OpGraph g = placement::testing::chain(3);
  g.ops[0].profile["cpu"] = {2.0, 4.0, 1.0, 4096};
  g.ops[1].profile["cpu"] = {1.0, 2.0, 0.0, 512};
  g.ops[1].profile["cuda"] = {9.0, 9.0, 9.0, 9};  // replaced
  scale_profile(g, "cpu", "cuda", 4.0);
  EXPECT_EQ(g.ops[0].profile.at("cuda"), (placement::OpProfile{0.5, 1.0, 0.25, 4096}));
  EXPECT_EQ(g.ops[1].profile.at("cuda"), (placement::OpProfile{0.25, 0.5, 0.0, 512}));
  EXPECT_EQ(g.ops[0].profile.at("cpu"), (placement::OpProfile{2.0, 4.0, 1.0, 4096})) << "the source is kept";
  EXPECT_EQ(g.ops[2].profile.count("cuda"), 0u) << "an op never profiled gets no estimate";
}

TEST(ScaleProfile, RefusesASpeedupThatIsNotPositive) {
  placement::OpGraph g = placement::testing::chain(1);
  EXPECT_THROW(scale_profile(g, "cpu", "cuda", 0.0), std::invalid_argument);
  EXPECT_THROW(scale_profile(g, "cpu", "cuda", -2.0), std::invalid_argument);
}

}  // namespace
}  // namespace placementd::sim
