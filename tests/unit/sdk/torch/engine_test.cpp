// The placed engine against the plain TorchScript module, on models traced at test time.

#include <gtest/gtest.h>

#include <random>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/sgd.h>

#include "placement/engine.h"
#include "traced_model.h"

namespace placement {
namespace {

using testing::is_recurrent_weight;

at::Tensor loss_of(const c10::IValue& out) { return out.toTensor().pow(2).mean(); }

std::vector<at::Tensor> gradients(torch::jit::Module& module) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : module.parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return out;
}

void zero_grad(torch::jit::Module& module) {
  for (at::Tensor p : module.parameters())
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
}

class SingleDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(SingleDevice, OutputsLossAndGradientsEqualThePlainModuleBitwise) {
  testing::TracedModel m = testing::load_traced_model(GetParam());
  const at::Tensor plain_out = m.module.forward(m.inputs).toTensor();
  const at::Tensor plain_loss = loss_of(plain_out);
  plain_loss.backward();
  const auto plain_grads = gradients(m.module);
  zero_grad(m.module);

  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  placed.set_placement(Placement::single(m.graph, 1));
  const at::Tensor out = placed.forward(m.inputs).at(0).toTensor();
  const at::Tensor loss = loss_of(out);
  loss.backward();
  EXPECT_TRUE(at::equal(out, plain_out));
  EXPECT_TRUE(at::equal(loss, plain_loss));
  const auto grads = gradients(m.module);
  ASSERT_EQ(grads.size(), plain_grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_EQ(grads[i].defined(), plain_grads[i].defined()) << "parameter " << i;
    if (grads[i].defined()) {
      EXPECT_TRUE(at::equal(grads[i], plain_grads[i])) << "gradient of parameter " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SingleDevice,
                         ::testing::Values("mlp", "two_tower", "gnmt_small", "rnnlm_small",
                                           "resnet18"));

// 20 SGD steps of the same data: the plain module, and the placed one with its ops spread over
// three logical devices.
std::vector<double> train(testing::TracedModel& m, const Placement* placement, int steps) {
  std::unique_ptr<PlacedModule> placed;
  if (placement) {
    placed = std::make_unique<PlacedModule>(m.module, m.graph, testing::logical_cpus(3));
    placed->set_placement(*placement);
  }
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : m.module.parameters()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.01).momentum(0.9));
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    const at::Tensor out =
        placed ? placed->forward(m.inputs).at(0).toTensor() : m.module.forward(m.inputs).toTensor();
    const at::Tensor loss = loss_of(out);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

class Spread : public ::testing::TestWithParam<std::string> {};

TEST_P(Spread, TwentyTrainingStepsMatchThePlainModule) {
  testing::TracedModel plain = testing::load_traced_model(GetParam());
  const auto expected = train(plain, nullptr, 20);
  testing::TracedModel placed =
      testing::load_traced_model(GetParam());  // fresh weights, identical to plain's (same file)
  std::mt19937 rng(5);
  Placement p;
  for (size_t i = 0; i < placed.graph.ops.size(); ++i)
    p.device_of_op.push_back(static_cast<int>(rng() % 3));
  const auto losses = train(placed, &p, 20);
  ASSERT_EQ(losses.size(), expected.size());
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], expected[i], 1e-5 * std::abs(expected[i])) << "step " << i;
  EXPECT_LT(losses.back(), losses.front()) << "it trains";
}

INSTANTIATE_TEST_SUITE_P(Models, Spread,
                         ::testing::Values("two_tower", "gnmt_small", "gnmt_small_unrolled",
                                           "bert_small"));

// Every op of `kind` on device 1, the rest on device 0.
Placement kind_on_device_1(const OpGraph& g, const std::string& kind) {
  Placement p = Placement::single(g, 0);
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == kind) p.device_of_op[i] = 1;
  return p;
}

TEST(PlacedModule, WeightsPassedInAListLiveWithTheOpThatReadsThem) {
  for (const std::string name : {"gnmt_small", "rnnlm_small"}) {
    testing::TracedModel m = testing::load_traced_model(name);
    PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
    const MigrationStats moved = placed.set_placement(kind_on_device_1(m.graph, "aten::lstm"));
    uint64_t recurrent_bytes = 0;
    for (const auto& p : m.module.named_parameters()) {
      const std::optional<int> device = placed.device_of(p.value);
      ASSERT_TRUE(device.has_value()) << name << ": " << p.name << " has no home";
      const bool lstm = is_recurrent_weight(p.name);
      if (lstm) recurrent_bytes += p.value.numel() * p.value.element_size();
      EXPECT_EQ(*device, lstm ? 1 : 0) << name << ": " << p.name;
    }
    EXPECT_GT(recurrent_bytes, 0u) << name;
    EXPECT_EQ(moved.bytes, recurrent_bytes)
        << name << ": exactly the recurrent weights move to device 1";
  }
}

TEST(PlacedModule, EveryParameterAndBufferTheGraphReadsHasAHome) {
  for (const std::string name : {"mlp", "two_tower", "gnmt_small", "gnmt_small_unrolled",
                                 "rnnlm_small", "bert_small", "resnet18"}) {
    testing::TracedModel m = testing::load_traced_model(name);
    PlacedModule placed(m.module, m.graph, testing::logical_cpus(3));
    std::mt19937 rng(11);
    Placement p;
    for (size_t i = 0; i < m.graph.ops.size(); ++i)
      p.device_of_op.push_back(static_cast<int>(rng() % 3));
    placed.set_placement(p);
    for (const auto& t : m.module.named_parameters())
      EXPECT_TRUE(placed.device_of(t.value).has_value()) << name << ": parameter " << t.name;
    for (const auto& t : m.module.named_buffers()) {
      // An eval-mode trace never reads the batch-norm step counter.
      if (t.name.find("num_batches_tracked") != std::string::npos) continue;
      EXPECT_TRUE(placed.device_of(t.value).has_value()) << name << ": buffer " << t.name;
    }
  }
}

TEST(PlacedModule, ParametersMoveInPlaceAndBadPlacementsAreRefused) {
  testing::TracedModel m = testing::load_traced_model("two_tower");
  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  std::vector<const c10::TensorImpl*> before;
  for (const auto& p : placed.parameters()) before.push_back(p.unsafeGetTensorImpl());
  Placement split = Placement::single(m.graph, 0);
  for (size_t i = 0; i < split.device_of_op.size(); i += 2) split.device_of_op[i] = 1;
  placed.set_placement(split);
  std::vector<const c10::TensorImpl*> after;
  for (const auto& p : placed.parameters()) after.push_back(p.unsafeGetTensorImpl());
  EXPECT_EQ(before, after) << "an optimizer built earlier still holds the trained tensors";
  EXPECT_THROW(placed.set_placement(Placement{{0, 1}}), std::invalid_argument);
  Placement foreign = split;
  foreign.device_of_op[0] = 7;
  EXPECT_THROW(placed.set_placement(foreign), std::invalid_argument);
  EXPECT_EQ(placed.placement(), split) << "a refused placement changes nothing";
  testing::TracedModel other = testing::load_traced_model("mlp");
  EXPECT_THROW(PlacedModule(m.module, other.graph, testing::logical_cpus(2)), CaptureError);
}

}  // namespace
}  // namespace placement
