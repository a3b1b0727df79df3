// Models users train, from Hugging Face transformers (BERT masked LM, GPT-2, a Llama-style
// decoder) at small configs, traced at test time by the torch the build links: capture, placed
// training equal to the plain module, and two-device placements that train.

#include <gtest/gtest.h>

#include <random>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include "placement/engine.h"
#include "traced_model.h"

namespace placement {
namespace {

// Traced, a transformers model returns its ModelOutput as a dict.
at::Tensor logits_of(const c10::IValue& out) { return out.toGenericDict().at("logits").toTensor(); }

// What these models train on: the decoders predict each next token, BERT's masked-LM head the
// token at each position.
at::Tensor lm_loss(const std::string& name, const c10::IValue& out,
                   const c10::IValue& tokens_value) {
  const at::Tensor logits = logits_of(out);
  const at::Tensor tokens = tokens_value.toTensor();
  const int64_t vocab = logits.size(-1);
  if (name == "hf_bert")
    return at::cross_entropy_loss(logits.reshape({-1, vocab}), tokens.reshape({-1}));
  const int64_t steps = logits.size(1) - 1;
  return at::cross_entropy_loss(logits.narrow(1, 0, steps).reshape({-1, vocab}),
                                tokens.narrow(1, 1, steps).reshape({-1}));
}

uint64_t bytes(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

class TransformersModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformersModel, CapturesEveryLayerAndEveryWeight) {
  const testing::TracedModel m = testing::load_traced_model(GetParam());
  int attention = 0;
  int embeddings = 0;
  uint64_t parameter_bytes = 0;
  for (const Op& op : m.graph.ops) {
    attention += op.kind == "aten::scaled_dot_product_attention";
    embeddings += op.kind == "aten::embedding";
    parameter_bytes += op.parameter_bytes;
  }
  EXPECT_EQ(attention, 2)
      << "one attention op per layer (2 layers, transformers' default SDPA attention)";
  EXPECT_GE(embeddings, 1);
  // Every weight is charged once (GPT-2 ties its output projection to the token embedding), and
  // nothing but the module's parameters and the buffers it reads.
  std::unordered_set<const c10::TensorImpl*> seen;
  uint64_t weights = 0;
  for (const at::Tensor& p : m.module.parameters())
    if (seen.insert(p.unsafeGetTensorImpl()).second) weights += bytes(p);
  uint64_t buffers = 0;
  for (const at::Tensor& b : m.module.buffers())
    if (seen.insert(b.unsafeGetTensorImpl()).second) buffers += bytes(b);
  EXPECT_GE(parameter_bytes, weights);
  EXPECT_LE(parameter_bytes, weights + buffers);

  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  for (const auto& p : m.module.named_parameters())
    EXPECT_TRUE(placed.device_of(p.value).has_value())
        << p.name << " has no home: it would never be placed";
}

TEST_P(TransformersModel, PlacedOnOneDeviceEqualsThePlainModuleBitwise) {
  const std::string name = GetParam();
  testing::TracedModel m = testing::load_traced_model(name);
  // Traced in train mode: dropout draws from the generator, seeded alike before each forward.
  at::manual_seed(7);
  const c10::IValue plain_out = m.module.forward(m.inputs);
  const at::Tensor plain_logits = logits_of(plain_out);
  const at::Tensor plain_loss = lm_loss(name, plain_out, m.inputs[0]);
  plain_loss.backward();
  std::vector<at::Tensor> plain_grads;
  // A weight the loss does not reach has none; a tied weight (BERT's and GPT-2's output projection
  // is the token embedding) is listed under both names, so all are read before any is cleared.
  for (const at::Tensor& p : m.module.parameters())
    plain_grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  for (at::Tensor p : m.module.parameters()) p.mutable_grad() = at::Tensor();

  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  placed.set_placement(Placement::single(m.graph, 1));
  at::manual_seed(7);
  const auto out = placed.forward(m.inputs);
  EXPECT_TRUE(at::equal(logits_of(out.at(0)), plain_logits));
  const at::Tensor loss = lm_loss(name, out.at(0), m.inputs[0]);
  EXPECT_TRUE(at::equal(loss, plain_loss));
  loss.backward();
  size_t i = 0;
  size_t with_gradient = 0;
  for (const auto& p : m.module.named_parameters()) {
    const at::Tensor& expected = plain_grads.at(i++);
    ASSERT_EQ(p.value.grad().defined(), expected.defined()) << p.name;
    if (!expected.defined()) continue;
    ++with_gradient;
    EXPECT_TRUE(at::equal(p.value.grad(), expected)) << "gradient of " << p.name;
  }
  EXPECT_GT(with_gradient, plain_grads.size() / 2);
}

// 15 SGD steps on the same batch: the plain module, and the placed one under `placement`.
std::vector<double> train_transformer(const std::string& name, const Placement* placement) {
  testing::TracedModel m = testing::load_traced_model(name);
  std::unique_ptr<PlacedModule> placed;
  if (placement) {
    placed = std::make_unique<PlacedModule>(m.module, m.graph, testing::logical_cpus(2));
    placed->set_placement(*placement);
  }
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : m.module.parameters()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.05).momentum(0.9));
  std::vector<double> losses;
  for (int step = 0; step < 15; ++step) {
    sgd.zero_grad();
    const c10::IValue out = placed ? placed->forward(m.inputs).at(0) : m.module.forward(m.inputs);
    const at::Tensor loss = lm_loss(name, out, m.inputs[0]);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void expect_same_training(const std::string& name, const Placement& placement) {
  const auto expected = train_transformer(name, nullptr);
  const auto losses = train_transformer(name, &placement);
  ASSERT_EQ(losses.size(), expected.size());
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], expected[i], 1e-5 * std::abs(expected[i])) << "step " << i;
  EXPECT_LT(losses.back(), 0.9 * losses.front()) << "it trains";
}

TEST_P(TransformersModel, SplitInTwoStagesTrainsLikeThePlainModule) {
  const OpGraph graph = testing::load_traced_model(GetParam()).graph;
  Placement halves = Placement::single(graph, 0);
  for (size_t i = graph.ops.size() / 2; i < graph.ops.size(); ++i) halves.device_of_op[i] = 1;
  expect_same_training(GetParam(), halves);
}

TEST_P(TransformersModel, EveryOpOnARandomDeviceTrainsLikeThePlainModule) {
  const OpGraph graph = testing::load_traced_model(GetParam()).graph;
  std::mt19937 rng(3);
  Placement scattered;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    scattered.device_of_op.push_back(static_cast<int>(rng() % 2));
  expect_same_training(GetParam(), scattered);
}

INSTANTIATE_TEST_SUITE_P(Models, TransformersModel,
                         ::testing::Values("hf_bert", "hf_gpt2", "hf_llama"));

}  // namespace
}  // namespace placement
