// The profiler on real training steps of models traced at test time.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include "placement/capture.h"
#include "placement/profiler.h"

namespace placement {
namespace {

struct Fixture {
  explicit Fixture(const std::string& name) {
    std::ifstream in(std::string(MODEL_DIR) + "/" + name + ".json");
    const auto spec = nlohmann::json::parse(in);
    module = torch::jit::load(std::string(MODEL_DIR) + "/" + name + ".pt");
    std::vector<at::Tensor> tensors =
        example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
    for (const auto& t : tensors) inputs.emplace_back(t);
    graph = capture(module, tensors, name);
    placed = std::make_unique<PlacedModule>(
        module, graph, DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 34, 1.0}}, 1e9, 0));
    sgd = std::make_unique<torch::optim::SGD>(placed->parameters(), torch::optim::SGDOptions(1e-3));
  }
  void forward_backward() { placed->forward(inputs).at(0).toTensor().pow(2).mean().backward(); }
  void update() {
    sgd->step();
    sgd->zero_grad();
  }
  torch::jit::Module module;
  std::vector<c10::IValue> inputs;
  OpGraph graph;
  std::unique_ptr<PlacedModule> placed;
  std::unique_ptr<torch::optim::SGD> sgd;
};

TEST(Profiler, EveryOpIsTimedAndTheTimesAccountForTheStep) {
  Fixture f("resnet18");
  // Medians of 5 (not 3): on a loaded 2-core machine one slow step in three skewed the sums below.
  const auto profiles = profile_steps(
      *f.placed, [&] { f.forward_backward(); }, [&] { f.update(); }, {2, 5});
  ASSERT_EQ(profiles.size(), f.graph.ops.size());
  double forward = 0, backward = 0, update = 0;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const Op& op = f.graph.ops[i];
    EXPECT_GT(profiles[i].forward_s, 0.0) << op.name;
    if (op.parameter_bytes > 0 && op.kind == "aten::_convolution") {
      EXPECT_GT(profiles[i].backward_s, 0.0) << op.name << ": its autograd nodes were timed";
      EXPECT_GT(profiles[i].update_s, 0.0) << op.name;
      EXPECT_EQ(profiles[i].activation_bytes, op.output_bytes()) << op.name;
    }
    forward += profiles[i].forward_s;
    backward += profiles[i].backward_s;
    update += profiles[i].update_s;
  }
  // A plain measured step, for scale: the ops' own times must make up most of it.
  std::vector<double> steps;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f.forward_backward();
    steps.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    f.update();
  }
  std::sort(steps.begin(), steps.end());
  EXPECT_GT(backward, forward * 0.5) << "backward is rarely much cheaper than forward";
  EXPECT_GT(forward + backward, 0.4 * steps[2]) << "median step " << steps[2] << " s";
  EXPECT_LT(forward + backward, 1.5 * steps[2]) << "median step " << steps[2] << " s";
  EXPECT_GT(update, 0.0);

  record_profiles(f.graph, *f.placed, profiles);
  EXPECT_EQ(f.graph.ops[0].profile.count("cpu"), 1u);
  EXPECT_EQ(f.graph.ops[0].profile.at("cpu"), profiles[0]);
}

TEST(Profiler, RecurrentModelBackwardIsAttributedToItsLayers) {
  Fixture f("gnmt_small");
  // Medians of 5 (not 3): on a loaded 2-core machine one slow step in three skewed the sums below.
  const auto profiles = profile_steps(
      *f.placed, [&] { f.forward_backward(); }, [&] { f.update(); }, {2, 5});
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (f.graph.ops[i].kind == "aten::lstm") {
      EXPECT_GT(profiles[i].backward_s, 0.0) << f.graph.ops[i].name;
    }
  }
}

}  // namespace
}  // namespace placement
