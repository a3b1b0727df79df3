#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expert.h"
#include "placer_inputs.h"
#include "test_graphs.h"

namespace placement::plugins {
namespace {

TEST(Expert, LayerIndexComesFromTheModulePath) {
  EXPECT_EQ(ExpertPlacer::layer_of("encoder.layers.3.self_attn/linear.1"), 3);
  EXPECT_EQ(ExpertPlacer::layer_of("decoder.2/lstm"), 2);
  EXPECT_EQ(ExpertPlacer::layer_of("embed_src/embedding"), std::nullopt);
  EXPECT_EQ(ExpertPlacer::layer_of("cat.1"), std::nullopt)
      << "an op's repeat suffix is not a layer";
}

// A GNMT-like stack: embedding, encoder layers 0..3, attention, decoder layers 0..3, projection.
OpGraph stack() {
  OpGraph g;
  auto add = [&](const std::string& name) {
    const int id = static_cast<int>(g.ops.size());
    g.ops.push_back({id, name, "aten::x", {}, 0, {}, {}});
    if (id > 0) g.edges.push_back({id - 1, id, 4});
    return id;
  };
  add("embed_src/embedding");
  for (int l = 0; l < 4; ++l) add("encoder." + std::to_string(l) + "/lstm");
  add("add");  // residual between layers: follows its producer
  add("attention/softmax");
  for (int l = 0; l < 4; ++l) add("decoder." + std::to_string(l) + "/lstm");
  add("project/linear");
  return g;
}

std::vector<int> place(const OpGraph& g, const DeviceSet& d, bool gpus_only = true) {
  ExpertPlacer placer(ExpertOptions{gpus_only});
  std::mt19937_64 rng(1);
  placer.prepare(g, testing::each_op_alone(g), d, rng);
  return placer.place(rng);
}

TEST(Expert, LayerIOnDeviceIWithEmbeddingFirstAndSoftmaxLast) {
  // cpu:0 then cuda:0..3: with gpus_only the CPU gets nothing.
  std::vector<Device> list = {{DeviceKind::kCpu, 0, 1 << 30, 1.0}};
  for (int i = 0; i < 4; ++i) list.push_back({DeviceKind::kCuda, i, 1 << 30, 1.0});
  const DeviceSet d = DeviceSet::uniform(list, 1e9, 0);
  const auto p = place(stack(), d);
  EXPECT_EQ(p, (std::vector<int>{1, 1, 2, 3, 4, 4, 4, 1, 2, 3, 4, 4}));
  // Without the GPU restriction the CPU is device 0 of the stack.
  EXPECT_EQ(place(stack(), d, false)[0], 0);
}

TEST(Expert, MoreLayersThanDevicesShareContiguously) {
  const auto p = place(stack(), testing::devices(2));
  EXPECT_EQ(p[1], 0);      // encoder.0
  EXPECT_EQ(p[2], 0);      // encoder.1
  EXPECT_EQ(p[3], 1);      // encoder.2
  EXPECT_EQ(p[4], 1);      // encoder.3
  EXPECT_EQ(p.back(), 1);  // projection with the last layer
}

TEST(Expert, GroupsFollowTheMajorityOfTheirOps) {
  const OpGraph g = stack();
  Grouping halves{{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, 2};
  ExpertPlacer placer(ExpertOptions{false});
  std::mt19937_64 rng(1);
  placer.prepare(g, halves, testing::devices(4), rng);
  EXPECT_EQ(placer.place(rng), (std::vector<int>{0, 3}));
}

}  // namespace
}  // namespace placement::plugins
