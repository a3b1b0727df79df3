#include <gtest/gtest.h>

#include "config_errors.h"
#include "planning/sim/topology.h"

namespace placementd::sim {
namespace {

std::vector<std::string> errors_of(const std::string& text) {
  return placementd::testing::config_errors([&] { parse_topology(text, "t.toml"); });
}

TEST(Topology, ShippedFilesLoad) {
  const auto one = load_topology(TOPOLOGY_DIR "/1xh100_cpu.toml");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one.devices[1].name(), "cuda:0");
  EXPECT_EQ(one.devices[1].memory_bytes, 80ull << 30);
  EXPECT_DOUBLE_EQ(one.bandwidth[0][1], 50e9);
  EXPECT_DOUBLE_EQ(one.latency[1][0], 10e-6);
  const auto nvlink = load_topology(TOPOLOGY_DIR "/4xh100_nvlink.toml");
  ASSERT_EQ(nvlink.size(), 5u);
  EXPECT_DOUBLE_EQ(nvlink.bandwidth[1][4], 450e9);  // cuda:0 -> cuda:3
  EXPECT_DOUBLE_EQ(nvlink.bandwidth[0][2], 50e9);   // cpu -> cuda:1 (default)
  EXPECT_EQ(load_topology(TOPOLOGY_DIR "/4xh100_cpu_pcie5.toml").size(), 5u);
}

TEST(Topology, DeviceWithoutMemoryAndMissingLinksAreNamed) {
  const auto errors = errors_of(
      "[[device]]\nname = \"cpu:0\"\nmemory_gib = 8\n"
      "[[device]]\nname = \"cuda:0\"\n"
      "[[device]]\nname = \"cuda:1\"\nmemory_gib = 80\n"
      "[[link]]\nbetween = [\"cpu:0\", \"cuda:0\"]\nbandwidth_gbs = 50\n");
  ASSERT_EQ(errors.size(), 3u) << errors[0];
  EXPECT_EQ(errors[0], "t.toml: no link between cpu:0 and cuda:1 (add a [[link]] for them, or bandwidth_gbs in [defaults])");
  EXPECT_EQ(errors[2], "t.toml:4:1: device cuda:0 has no memory_gib");
}

TEST(Topology, BadEntriesCarryPositions) {
  const auto errors = errors_of(
      "[defaults]\nbandwidth_gbs = 10\n"
      "[[device]]\nname = \"tpu:0\"\nmemory_gib = 8\n"
      "[[device]]\nname = \"cpu:0\"\nmemory_gib = -1\ncolour = 3\n"
      "[[link]]\nbetween = [\"cpu:0\", \"cuda:9\"]\nbandwidth_gbs = 1\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0], "t.toml:4:8: device[0].name: unknown device kind 'tpu' (expected cpu or cuda)");
  EXPECT_EQ(errors[1].rfind("t.toml:8:14: device[1].memory_gib must be in", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("t.toml:9:1: unknown key 'colour' in device[1]", 0), 0u) << errors[2];
  EXPECT_EQ(errors[3], "t.toml:11:11: link[0]: no device named 'cuda:9'");
}

}  // namespace
}  // namespace placementd::sim
