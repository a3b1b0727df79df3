// Moving optimizer state with its parameters when the placement changes, on a model whose weights
// reach their op through a list (a traced nn.LSTM).

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "optimizer_state.h"
#include "placement/engine.h"
#include "traced_model.h"
#include "update_guard.h"

namespace placement {
namespace {

using testing::is_recurrent_weight;
using testing::load_traced_model;

double step(PlacedModule& placed, const std::vector<c10::IValue>& inputs,
            torch::optim::Adam& adam) {
  adam.zero_grad();
  const at::Tensor loss = placed.forward(inputs).at(0).toTensor().pow(2).mean();
  loss.backward();
  adam.step();
  return loss.item<double>();
}

torch::optim::AdamParamState& adam_state(torch::optim::Adam& adam, const at::Tensor& p) {
  auto& states = adam.state();
  return static_cast<torch::optim::AdamParamState&>(*states.at(p.unsafeGetTensorImpl()));
}

TEST(OptimizerState, ASwapMovesRecurrentWeightsAndTheirAdamStateBitwise) {
  testing::TracedModel m = load_traced_model("rnnlm_small");
  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  torch::optim::Adam adam(placed.parameters(), torch::optim::AdamOptions(0.01));
  for (int i = 0; i < 2; ++i) step(placed, m.inputs, adam);

  struct Saved {
    at::Tensor parameter, value, exp_avg, exp_avg_sq;
  };
  std::vector<Saved> saved;
  uint64_t recurrent_bytes = 0;
  for (const auto& p : m.module.named_parameters())
    if (is_recurrent_weight(p.name)) {
      auto& s = adam_state(adam, p.value);
      saved.push_back({p.value, p.value.detach().clone(), s.exp_avg(), s.exp_avg_sq()});
      recurrent_bytes += p.value.numel() * p.value.element_size();
    }
  ASSERT_EQ(saved.size(), 8u) << "two layers, two weights and two biases each";

  Placement lstm_on_1 = placed.placement();
  for (size_t i = 0; i < m.graph.ops.size(); ++i)
    if (m.graph.ops[i].kind == "aten::lstm") lstm_on_1.device_of_op[i] = 1;
  const PlacementMove moved = move_with_state(placed, adam, lstm_on_1);
  EXPECT_EQ(moved.module.bytes, recurrent_bytes);
  EXPECT_EQ(moved.state_bytes, 2 * recurrent_bytes)
      << "both Adam moments of every recurrent weight";
  for (const Saved& s : saved) {
    EXPECT_EQ(placed.device_of(s.parameter), 1);
    EXPECT_TRUE(at::equal(s.parameter, s.value)) << "the weight's values survive the move";
    auto& now = adam_state(adam, s.parameter);
    EXPECT_FALSE(now.exp_avg().is_same(s.exp_avg)) << "device 1 holds a copy of its own";
    EXPECT_TRUE(at::equal(now.exp_avg(), s.exp_avg));
    EXPECT_TRUE(at::equal(now.exp_avg_sq(), s.exp_avg_sq));
  }
}

TEST(OptimizerState, TrainingAcrossASwapEqualsTrainingWithoutOne) {
  testing::TracedModel plain = load_traced_model("rnnlm_small");
  PlacedModule unswapped(plain.module, plain.graph, testing::logical_cpus(2));
  torch::optim::Adam plain_adam(unswapped.parameters(), torch::optim::AdamOptions(0.01));
  std::vector<double> expected;
  for (int i = 0; i < 6; ++i) expected.push_back(step(unswapped, plain.inputs, plain_adam));

  testing::TracedModel m = load_traced_model("rnnlm_small");
  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  torch::optim::Adam adam(placed.parameters(), torch::optim::AdamOptions(0.01));
  std::vector<double> losses;
  for (int i = 0; i < 3; ++i) losses.push_back(step(placed, m.inputs, adam));
  Placement spread = placed.placement();
  for (size_t i = 0; i < m.graph.ops.size(); i += 2) spread.device_of_op[i] = 1;
  move_with_state(placed, adam, spread);
  for (int i = 0; i < 3; ++i) losses.push_back(step(placed, m.inputs, adam));
  ASSERT_EQ(losses.size(), expected.size());
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_EQ(losses[i], expected[i]) << "step " << i;
}

// An update undone by its guard leaves the model and Adam as if it never ran: the training that
// follows equals a twin's that never ran it, bit for bit (Adam's step count sets its bias
// correction, so a count left behind would show). Before Adam's first step the guard also drops
// the state that step creates.
void expect_an_undone_update_leaves_no_trace(int steps_before) {
  testing::TracedModel a = load_traced_model("rnnlm_small");
  testing::TracedModel b = load_traced_model("rnnlm_small");
  PlacedModule guarded(a.module, a.graph, testing::logical_cpus(2)),
      twin(b.module, b.graph, testing::logical_cpus(2));
  torch::optim::Adam adam(guarded.parameters(), torch::optim::AdamOptions(0.01));
  torch::optim::Adam twin_adam(twin.parameters(), torch::optim::AdamOptions(0.01));
  for (int i = 0; i < steps_before; ++i) {
    step(guarded, a.inputs, adam);
    step(twin, b.inputs, twin_adam);
  }
  const size_t states_before = adam.state().size();
  TorchStepOptimizer adapted(adam);
  const detail::UpdateGuard guard(guarded.parameters(), adapted);
  ASSERT_TRUE(guard.armed());
  uint64_t parameter_bytes = 0;
  for (const at::Tensor& p : guarded.parameters()) parameter_bytes += p.numel() * p.element_size();
  EXPECT_EQ(guard.bytes(), steps_before == 0 ? parameter_bytes : 3 * parameter_bytes)
      << "the values, and both moments once Adam has them";
  step(guarded, a.inputs, adam);  // the update undone
  EXPECT_EQ(adam.state().size(), guarded.parameters().size());
  guard.undo();
  EXPECT_EQ(adam.state().size(), states_before);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(step(guarded, a.inputs, adam), step(twin, b.inputs, twin_adam)) << "step " << i;
  const std::vector<at::Tensor> p = guarded.parameters(), q = twin.parameters();
  ASSERT_EQ(p.size(), q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_TRUE(at::equal(p[i], q[i])) << "parameter " << i;
    const auto& s = adam_state(adam, p[i]);
    const auto& t = adam_state(twin_adam, q[i]);
    EXPECT_EQ(s.step(), t.step()) << "parameter " << i;
    EXPECT_TRUE(at::equal(s.exp_avg(), t.exp_avg())) << "parameter " << i;
    EXPECT_TRUE(at::equal(s.exp_avg_sq(), t.exp_avg_sq())) << "parameter " << i;
  }
}

TEST(OptimizerState, AnUndoneUpdateLeavesValuesMomentsAndStepCountsAsTheyWere) {
  expect_an_undone_update_leaves_no_trace(2);
}

TEST(OptimizerState, AnUndoneFirstUpdateDropsTheStateItCreated) {
  expect_an_undone_update_leaves_no_trace(0);
}

// An optimizer whose state the guard cannot copy (a type it does not know) is not guarded: the
// update runs as it would without one.
TEST(OptimizerState, AStateItCannotCopyLeavesTheUpdateUnguarded) {
  struct Unknown final : torch::optim::OptimizerCloneableParamState<Unknown> {};
  testing::TracedModel m = load_traced_model("rnnlm_small");
  PlacedModule placed(m.module, m.graph, testing::logical_cpus(2));
  torch::optim::Adam adam(placed.parameters(), torch::optim::AdamOptions(0.01));
  adam.state()[placed.parameters().front().unsafeGetTensorImpl()] = std::make_unique<Unknown>();
  TorchStepOptimizer adapted(adam);
  const detail::UpdateGuard guard(placed.parameters(), adapted);
  EXPECT_FALSE(guard.armed());
  EXPECT_EQ(guard.bytes(), 0u);
}

// What each optimizer says it will keep for a parameter before its first update is what it keeps
// after it: the figure a memory limit refuses a placement by.
TEST(OptimizerState, TheStateExpectedBeforeTheFirstUpdateIsTheStateAfterIt) {
  namespace o = torch::optim;
  const auto make = [](const std::string& kind,
                       std::vector<at::Tensor> params) -> std::unique_ptr<o::Optimizer> {
    if (kind == "adam") return std::make_unique<o::Adam>(params, o::AdamOptions(0.01));
    if (kind == "adam_amsgrad")
      return std::make_unique<o::Adam>(params, o::AdamOptions(0.01).amsgrad(true));
    if (kind == "adamw") return std::make_unique<o::AdamW>(params, o::AdamWOptions(0.01));
    if (kind == "sgd") return std::make_unique<o::SGD>(params, o::SGDOptions(0.01));
    if (kind == "sgd_momentum")
      return std::make_unique<o::SGD>(params, o::SGDOptions(0.01).momentum(0.9));
    if (kind == "rmsprop_centered_momentum")
      return std::make_unique<o::RMSprop>(params,
                                          o::RMSpropOptions(0.01).momentum(0.9).centered(true));
    return std::make_unique<o::Adagrad>(params, o::AdagradOptions(0.01));
  };
  const std::map<std::string, uint64_t> tensors_per_parameter = {
      {"adam", 2},   {"adam_amsgrad", 3}, {"adamw", 2},
      {"sgd", 0},    {"sgd_momentum", 1}, {"rmsprop_centered_momentum", 3},
      {"adagrad", 1}};
  for (const auto& [kind, tensors] : tensors_per_parameter) {
    SCOPED_TRACE(kind);
    testing::TracedModel m = load_traced_model("rnnlm_small");
    PlacedModule placed(m.module, m.graph, testing::logical_cpus(1));
    std::vector<at::Tensor> params = placed.parameters();
    const at::Tensor left_out = params.back();
    params.pop_back();
    std::unique_ptr<o::Optimizer> optimizer = make(kind, params);
    TorchStepOptimizer adapted(*optimizer);
    std::vector<uint64_t> expected;
    for (const at::Tensor& p : params) {
      const std::optional<uint64_t> bytes = adapted.expected_state_bytes(p);
      ASSERT_TRUE(bytes.has_value());
      EXPECT_EQ(*bytes, tensors * p.nbytes());
      expected.push_back(*bytes);
    }
    EXPECT_EQ(adapted.expected_state_bytes(left_out), 0u) << "a parameter it does not update";
    optimizer->zero_grad();
    placed.forward(m.inputs).at(0).toTensor().pow(2).mean().backward();
    optimizer->step();
    const std::vector<std::vector<at::Tensor>> state = adapted.state_tensors(params);
    for (size_t i = 0; i < params.size(); ++i) {
      uint64_t bytes = 0;
      for (const at::Tensor& t : state[i]) bytes += t.nbytes();
      EXPECT_EQ(bytes, expected[i]) << "parameter " << i;
    }
  }
}

TEST(OptimizerState, AnOptimizerItDoesNotKnowCannotTellItsState) {
  testing::TracedModel m = load_traced_model("mlp");
  PlacedModule placed(m.module, m.graph, testing::logical_cpus(1));
  torch::optim::LBFGS lbfgs(placed.parameters());
  TorchStepOptimizer adapted(lbfgs);
  EXPECT_FALSE(adapted.expected_state_bytes(placed.parameters().front()).has_value());
}

// Stepping some parameters apart from the rest (what a job does with those that live on the host,
// while the backward goes on) is bit for bit one step, for each optimizer that can, with each
// group's options; a subclass may step otherwise and cannot.
template <typename Optimizer, typename Options>
void expect_steps_apart_as_one(const Options& first, const Options& second) {
  SCOPED_TRACE(typeid(Optimizer).name());
  auto make = [] {
    at::manual_seed(9);
    std::vector<at::Tensor> ps;
    for (int i = 0; i < 4; ++i) ps.push_back(at::randn({8, 4}).requires_grad_());
    return ps;
  };
  std::vector<at::Tensor> mine = make(), twin = make();
  auto groups = [&](std::vector<at::Tensor>& ps) {
    return std::vector<torch::optim::OptimizerParamGroup>{
        torch::optim::OptimizerParamGroup({ps[0], ps[1]}, std::make_unique<Options>(first)),
        torch::optim::OptimizerParamGroup({ps[2], ps[3]}, std::make_unique<Options>(second))};
  };
  Optimizer a(groups(mine), first), b(groups(twin), first);
  TorchStepOptimizer apart(a);
  ASSERT_TRUE(apart.steps_parameters_apart());
  for (int step = 0; step < 3; ++step) {
    at::manual_seed(100 + step);
    for (size_t i = 0; i < 4; ++i) {
      const at::Tensor g = at::randn({8, 4});
      mine[i].mutable_grad() = g.clone();
      twin[i].mutable_grad() = g.clone();
    }
    apart.step_parameters({mine[3], mine[0]});
    apart.step_parameters({mine[1]});
    apart.step_parameters({mine[2]});
    b.step();
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(mine[i], twin[i])) << "parameter " << i;
  EXPECT_EQ(a.param_groups().at(0).params().size(), 2u) << "a group kept its parameters";
  EXPECT_EQ(a.param_groups().at(1).params().size(), 2u);
}

TEST(OptimizerState, SteppingParametersApartIsBitForBitOneStep) {
  namespace o = torch::optim;
  expect_steps_apart_as_one<o::Adam>(o::AdamOptions(1e-2), o::AdamOptions(1e-3).amsgrad(true));
  expect_steps_apart_as_one<o::AdamW>(o::AdamWOptions(1e-2),
                                      o::AdamWOptions(1e-3).weight_decay(0.1));
  expect_steps_apart_as_one<o::SGD>(o::SGDOptions(1e-2).momentum(0.9).nesterov(true),
                                    o::SGDOptions(1e-3));
  expect_steps_apart_as_one<o::RMSprop>(o::RMSpropOptions(1e-2).centered(true).momentum(0.5),
                                        o::RMSpropOptions(1e-3));
  expect_steps_apart_as_one<o::Adagrad>(o::AdagradOptions(1e-2), o::AdagradOptions(1e-3));
}

TEST(OptimizerState, ASubclassOrAnotherOptimizerDoesNotStepParametersApart) {
  struct MyAdam final : torch::optim::Adam {
    using torch::optim::Adam::Adam;
  };
  std::vector<at::Tensor> ps = {at::randn({2}).requires_grad_()};
  MyAdam mine(ps, torch::optim::AdamOptions(1e-2));
  torch::optim::LBFGS lbfgs(ps, torch::optim::LBFGSOptions(1e-2));
  EXPECT_FALSE(TorchStepOptimizer(mine).steps_parameters_apart());
  EXPECT_FALSE(TorchStepOptimizer(lbfgs).steps_parameters_apart());
  EXPECT_THROW(TorchStepOptimizer(lbfgs).step_parameters(ps), std::logic_error);
}

}  // namespace
}  // namespace placement
