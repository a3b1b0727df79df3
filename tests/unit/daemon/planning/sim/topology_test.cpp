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
  for (const auto& d : nvlink.devices)
    EXPECT_TRUE(d.spec) << d.name() << ": every shipped device has cost-model figures";
  const Topology nodes = load_topology_file(TOPOLOGY_DIR "/4xh100_nvlink.toml");
  ASSERT_TRUE(nodes.node_link);
  EXPECT_DOUBLE_EQ(nodes.node_link->bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(nodes.node_link->latency, 5e-6);
  EXPECT_FALSE(load_topology_file(TOPOLOGY_DIR "/1xh100_cpu.toml").node_link);
  const auto k40 = load_topology(TOPOLOGY_DIR "/2xk40_cpu.toml");
  ASSERT_EQ(k40.size(), 3u);
  EXPECT_EQ(k40.devices[1].spec->preset, "k40");
  EXPECT_EQ(k40.devices[1].memory_bytes, 12ull << 30);
  EXPECT_DOUBLE_EQ(k40.devices[0].spec->fp32_flops, 1.32e12);
}

TEST(Topology, TheLinkBetweenNodesIsOneAndNamesNoDevice) {
  const std::string devices = "[[device]]\nname = \"cpu:0\"\nmemory_gib = 8\n";
  const auto errors = errors_of(devices +
                                "[[link]]\nbetween = [\"node\", \"cpu:0\"]\nbandwidth_gbs = 50\n"
                                "[[link]]\nbetween = [\"node\", \"node\"]\nlatency_us = 5\n");
  ASSERT_EQ(errors.size(), 2u) << errors[0];
  EXPECT_EQ(
      errors[0],
      "t.toml:5:11: link[0]: \"node\" stands for a whole node: the link between nodes is between = "
      "[\"node\", \"node\"]");
  EXPECT_EQ(errors[1], "t.toml:7:1: link[1] needs bandwidth_gbs (400 Gb/s: 50)");
  const auto twice = errors_of(devices +
                               "[[link]]\nbetween = [\"node\", \"node\"]\nbandwidth_gbs = 50\n"
                               "[[link]]\nbetween = [\"node\", \"node\"]\nbandwidth_gbs = 25\n");
  ASSERT_EQ(twice.size(), 1u);
  EXPECT_EQ(twice[0], "t.toml:8:11: link[1]: a second link between nodes (one is enough)");
  const Topology t = parse_topology_text(
      devices + "[[link]]\nbetween = [\"node\", \"node\"]\nbandwidth_gbs = 25\n", "t.toml");
  ASSERT_TRUE(t.node_link);
  EXPECT_DOUBLE_EQ(t.node_link->bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(t.node_link->latency, 0.0);
  EXPECT_EQ(t.devices.size(), 1u);
}

TEST(Topology, DeviceWithoutMemoryAndMissingLinksAreNamed) {
  const auto errors = errors_of(
      "[[device]]\nname = \"cpu:0\"\nmemory_gib = 8\n"
      "[[device]]\nname = \"cuda:0\"\n"
      "[[device]]\nname = \"cuda:1\"\nmemory_gib = 80\n"
      "[[link]]\nbetween = [\"cpu:0\", \"cuda:0\"]\nbandwidth_gbs = 50\n");
  ASSERT_EQ(errors.size(), 3u) << errors[0];
  EXPECT_EQ(errors[0],
            "t.toml: no link between cpu:0 and cuda:1 (add a [[link]] for them, or bandwidth_gbs "
            "in [defaults])");
  EXPECT_EQ(errors[2],
            "t.toml:4:1: device cuda:0 has no memory_gib (and no spec preset to take it from)");
}

TEST(Topology, BadEntriesCarryPositions) {
  const auto errors = errors_of(
      "[defaults]\nbandwidth_gbs = 10\n"
      "[[device]]\nname = \"tpu:0\"\nmemory_gib = 8\n"
      "[[device]]\nname = \"cpu:0\"\nmemory_gib = -1\ncolour = 3\n"
      "[[link]]\nbetween = [\"cpu:0\", \"cuda:9\"]\nbandwidth_gbs = 1\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0],
            "t.toml:4:8: device[0].name: unknown device kind 'tpu' (expected cpu or cuda)");
  EXPECT_EQ(errors[1].rfind("t.toml:8:14: device[1].memory_gib must be in", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("t.toml:9:1: unknown key 'colour' in device[1]", 0), 0u) << errors[2];
  EXPECT_EQ(errors[3], "t.toml:11:11: link[0]: no device named 'cuda:9'");
}

TEST(Topology, DeviceSpecFromAPresetWithOverrides) {
  const auto set = parse_topology(
      "[defaults]\nbandwidth_gbs = 50\n"
      "[[device]]\nname = \"cuda:0\"\nspec = \"h100-sxm\"\n"
      "[[device]]\nname = \"cuda:1\"\nspec = \"a100-sxm\"\nmemory_gib = 40\nmemory_bandwidth_gbs = "
      "1555\n"
      "[[device]]\nname = \"cpu:0\"\nmemory_gib = 64\nfp32_tflops = 2\nmemory_bandwidth_gbs = "
      "100\nlaunch_us = 4\n"
      "conv_layout_gbs = 3.5\npool_efficiency = 0.004\nrnn_layer_us = 110\nrnn_step_us = "
      "1.5\nstep_us = 90\n"
      "[[device]]\nname = \"cpu:1\"\nmemory_gib = 64\n",
      "t.toml");
  ASSERT_EQ(set.size(), 4u);
  ASSERT_TRUE(set.devices[0].spec);
  EXPECT_EQ(set.devices[0].spec->preset, "h100-sxm");
  EXPECT_EQ(set.devices[0].memory_bytes, 80ull << 30);  // the preset's
  EXPECT_DOUBLE_EQ(set.devices[0].spec->tf32_flops, 494.7e12);
  ASSERT_TRUE(set.devices[1].spec);
  EXPECT_EQ(set.devices[1].memory_bytes, 40ull << 30);
  EXPECT_DOUBLE_EQ(set.devices[1].spec->memory_bandwidth, 1555e9);
  EXPECT_DOUBLE_EQ(set.devices[1].spec->fp32_flops, 19.5e12);  // kept from the preset
  EXPECT_EQ(set.devices[1].spec->preset, "a100-sxm (modified)");
  ASSERT_TRUE(set.devices[2].spec);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->fp32_flops, 2e12);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->launch_s, 4e-6);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->conv_layout_bandwidth, 3.5e9);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->pool_efficiency, 0.004);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->rnn_layer_s, 110e-6);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->rnn_step_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->step_s, 90e-6);
  EXPECT_DOUBLE_EQ(set.devices[2].spec->compute_efficiency,
                   placement::DeviceSpec{}.compute_efficiency);
  EXPECT_FALSE(set.devices[3].spec);
}

TEST(Topology, BadDeviceSpecsAreNamed) {
  const auto errors = errors_of(
      "[defaults]\nbandwidth_gbs = 50\n"
      "[[device]]\nname = \"cuda:0\"\nspec = \"h200-nvl\"\n"
      "[[device]]\nname = \"cpu:0\"\nspec = \"k40\"\nmemory_gib = 8\n"
      "[[device]]\nname = \"cuda:1\"\nmemory_gib = 8\nlaunch_us = 5\n"
      "[[device]]\nname = \"cuda:2\"\nmemory_gib = 8\nfp32_tflops = 10\nmemory_bandwidth_gbs = "
      "100\n"
      "compute_efficiency = 1.5\n");
  ASSERT_EQ(errors.size(), 5u) << errors[0];
  EXPECT_EQ(errors[0],
            "t.toml:3:1: device cuda:0 has no memory_gib (and no spec preset to take it from)");
  EXPECT_EQ(errors[1].rfind("t.toml:5:8: device[0].spec: unknown device preset 'h200-nvl' (known: "
                            "h100-sxm, h100-pcie",
                            0),
            0u)
      << errors[1];
  EXPECT_EQ(errors[2],
            "t.toml:8:8: device[1].spec: 'k40' is a cuda preset, but cpu:0 is a cpu device");
  EXPECT_EQ(errors[3],
            "t.toml:10:1: device cuda:1 gives cost-model figures but no fp32_tflops and "
            "memory_bandwidth_gbs "
            "(give them, or spec = \"<preset>\" to start from a preset)");
  EXPECT_EQ(errors[4].rfind("t.toml:19:22: device[3].compute_efficiency must be in", 0), 0u)
      << errors[4];
}

}  // namespace
}  // namespace placementd::sim
