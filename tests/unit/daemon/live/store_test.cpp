#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "live/store.h"
#include "test_graphs.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir); }
  std::string dir = (fs::temp_directory_path() / ("store." + std::to_string(::getpid()))).string();
};

TEST_F(StoreTest, KeepsTheFastestPlacementPerGraphAndDeviceSet) {
  Store store(dir);
  const auto g = placement::testing::chain(4);
  const auto d = placement::testing::devices(2);
  EXPECT_FALSE(store.best(g, d));
  EXPECT_TRUE(store.offer(g, d, {{{0, 0, 1, 1}}, 2.0, "a"}));
  EXPECT_FALSE(store.offer(g, d, {{{1, 1, 1, 1}}, 3.0, "b"})) << "slower must not replace";
  EXPECT_TRUE(store.offer(g, d, {{{0, 1, 1, 1}}, 1.5, "c"}));
  const auto best = Store(dir).best(g, d);  // a new instance reads what the old one wrote
  ASSERT_TRUE(best);
  EXPECT_EQ(best->placement.device_of_op, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(best->step_time_s, 1.5);
  EXPECT_EQ(best->job, "c");
  EXPECT_FALSE(store.best(placement::testing::chain(5), d)) << "another model has its own entry";
  EXPECT_FALSE(store.best(g, placement::testing::devices(3))) << "another device set has its own entry";
}

TEST_F(StoreTest, DamagedFileIsIgnoredNotFatal) {
  Store store(dir);
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  store.offer(g, d, {{{0, 1}}, 1.0, "a"});
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "placements")) std::ofstream(f.path()) << "{broken";
  EXPECT_FALSE(store.best(g, d));
  EXPECT_TRUE(store.offer(g, d, {{{1, 1}}, 5.0, "b"})) << "a damaged entry is replaced";
}

}  // namespace
}  // namespace placementd
