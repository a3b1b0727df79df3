// What a job does between and within its steps (JobCore, sdk/src/torch/job_core.h): a swap moves
// parameters and optimizer state together or neither, an error of the loss function is the user's
// only where the job's own placement would meet it too, and the model's outputs go before the
// backward.

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/optim/adam.h>

#include "job_core.h"
#include "optimizer_state.h"
#include "placement/engine.h"
#include "traced_model.h"

namespace placement::detail {
namespace {

using testing::load_traced_model;

// Adam, but moving its state fails; it notes where the parameters were when it was asked.
class StateThatCannotMove final : public StepOptimizer {
 public:
  StateThatCannotMove(torch::optim::Adam& adam, const PlacedModule& placed)
      : adam_(adam), placed_(placed) {}
  void step() override { adam_.step(); }
  void zero_grad() override { adam_.zero_grad(); }
  uint64_t move_state(const std::vector<at::Tensor>& parameters,
                      const std::vector<c10::Device>&) override {
    for (const at::Tensor& p : parameters) homes_when_asked.push_back(placed_.device_of(p));
    throw std::runtime_error("injected: no room for the moments");
  }
  std::vector<std::optional<int>> homes_when_asked;

 private:
  torch::optim::Adam& adam_;
  const PlacedModule& placed_;
};

// A job's core over a traced model on two logical CPUs, every op on cpu:0 (the job's own).
void set_up(JobCore& core, const testing::TracedModel& m) {
  core.graph = m.graph;
  core.devices = testing::logical_cpus(2);
  core.placed = std::make_unique<PlacedModule>(m.module, m.graph, core.devices);
  core.own.directive.placement = Placement::single(m.graph, 0);
  core.current = core.own;
}

TEST(JobCore, ASwapWhoseOptimizerStateCannotMoveChangesNothingAndMovesNothingBack) {
  testing::TracedModel m = load_traced_model("rnnlm_small");
  JobCore core;
  set_up(core, m);
  torch::optim::Adam adam(core.placed->parameters(), torch::optim::AdamOptions(0.01));
  core.placed->forward(m.inputs).at(0).toTensor().pow(2).mean().backward();
  adam.step();

  std::vector<at::Tensor> values;
  std::vector<const void*> storages;
  for (const at::Tensor& p : core.placed->parameters()) {
    values.push_back(p.detach().clone());
    storages.push_back(p.data_ptr());
  }
  const Placement before = core.placed->placement();
  JobCore::InForce target;
  target.directive.placement_id = 7;
  target.directive.placement = Placement::single(m.graph, 1);

  StateThatCannotMove optimizer(adam, *core.placed);
  EXPECT_FALSE(core.switch_to(target, optimizer));
  ASSERT_FALSE(optimizer.homes_when_asked.empty());
  for (const std::optional<int>& home : optimizer.homes_when_asked)
    EXPECT_EQ(home, 0) << "the state is moved before any parameter switches over, so a failure "
                          "leaves nothing to move back";
  EXPECT_EQ(core.placed->placement().device_of_op, before.device_of_op);
  EXPECT_EQ(core.stats.failed_swaps, 1u);
  EXPECT_EQ(core.stats.swaps, 0u);
  EXPECT_EQ(core.stats.migrated_bytes, 0u);
  size_t i = 0;
  for (const at::Tensor& p : core.placed->parameters()) {
    EXPECT_EQ(core.placed->device_of(p), 0);
    EXPECT_EQ(p.data_ptr(), storages[i]) << "parameter " << i << " keeps its memory, no copy";
    EXPECT_TRUE(at::equal(p.detach(), values[i])) << "parameter " << i;
    ++i;
  }

  // The same swap with a state that moves: parameters and moments arrive together.
  TorchStepOptimizer movable(adam);
  EXPECT_TRUE(core.switch_to(target, movable));
  EXPECT_EQ(core.current.directive.placement_id, 7u);
  EXPECT_GT(core.stats.migrated_bytes, 0u);
  for (const at::Tensor& p : core.placed->parameters()) EXPECT_EQ(core.placed->device_of(p), 1);
}

std::exception_ptr thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

TEST(JobCore, ALossFunctionErrorIsTheUsersOnlyWhereTheJobsOwnPlacementWouldMeetItToo) {
  const c10::Device cpu(c10::kCPU), gpu0(c10::kCUDA, 0), gpu1(c10::kCUDA, 1);
  const std::vector<c10::Device> own = {gpu0, gpu0};
  const auto bug = thrown([] { throw std::invalid_argument("the user's typo"); });
  const auto mismatch = thrown([] { TORCH_CHECK(false, "Expected all tensors on one device"); });
  const auto full = thrown([] { TORCH_CHECK_WITH(OutOfMemoryError, false, "cuda:1 is full"); });
  const auto interrupted = thrown([] { throw StepInterrupted("Ctrl-C"); });

  EXPECT_TRUE(loss_error_is_the_users(bug, {gpu0, gpu0}, own));
  EXPECT_TRUE(loss_error_is_the_users(mismatch, {gpu0, gpu0}, own))
      << "where the job's own placement puts the outputs, any error but a device's is the user's";
  EXPECT_FALSE(loss_error_is_the_users(mismatch, {gpu0, gpu1}, own))
      << "outputs elsewhere: the placement may have caused it";
  EXPECT_FALSE(loss_error_is_the_users(bug, {cpu, gpu0}, own));
  EXPECT_FALSE(loss_error_is_the_users(full, {gpu0, gpu0}, own)) << "a device's memory";
  EXPECT_FALSE(loss_error_is_the_users(bug, {gpu0, gpu0}, std::nullopt))
      << "before a step showed where the job's own placement puts them, nothing is known";
  EXPECT_TRUE(loss_error_is_the_users(interrupted, {gpu1}, std::nullopt));
}

TEST(JobCore, TheLossFunctionsOwnErrorUnderACandidateReachesTheCallerAsTheUsers) {
  testing::TracedModel m = load_traced_model("rnnlm_small");
  JobCore core;
  set_up(core, m);
  int calls = 0;
  const LossFunction buggy = [&calls](const std::vector<c10::IValue>&) -> at::Tensor {
    ++calls;
    throw std::invalid_argument("the user's typo");
  };
  const LossFunction fine = [](const std::vector<c10::IValue>& outputs) {
    return outputs.at(0).toTensor().pow(2).mean();
  };
  torch::optim::Adam adam(core.placed->parameters(), torch::optim::AdamOptions(0.01));
  TorchStepOptimizer optimizer(adam);
  JobCore::InForce candidate;
  candidate.directive.placement_id = 3;
  candidate.directive.placement = Placement::single(m.graph, 1);

  // Before any forward under the job's own placement: the candidate may be at fault.
  ASSERT_TRUE(core.switch_to(candidate, optimizer));
  EXPECT_THROW(core.forward_backward(m.inputs, buggy), std::invalid_argument);

  ASSERT_TRUE(core.switch_to(core.own, optimizer));
  core.forward_backward(m.inputs, fine);
  ASSERT_TRUE(core.own_output_devices.has_value());
  ASSERT_TRUE(core.switch_to(candidate, optimizer));
  // Logical CPU devices share the host: the outputs are where the job's own placement has them.
  EXPECT_THROW(core.forward_backward(m.inputs, buggy), LossFunctionError);
  EXPECT_EQ(calls, 2);

  const LossFunction out_of_memory = [](const std::vector<c10::IValue>&) -> at::Tensor {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "injected: cpu:1 is full");
  };
  EXPECT_THROW(core.forward_backward(m.inputs, out_of_memory), c10::OutOfMemoryError);
}

// An eager loop lets go of the model's outputs once its loss is computed, and its backward may
// take their memory: so does a step (the outputs of a language model, its logits, are often the
// step's largest tensor; docs/benchmarks.md, issue #40).
TEST(JobCore, TheModelsOutputsAreLetGoBeforeTheBackward) {
  testing::TracedModel m = load_traced_model("rnnlm_small");
  JobCore core;
  set_up(core, m);
  std::optional<c10::weak_intrusive_ptr<c10::TensorImpl>> output;
  std::optional<bool> alive_in_backward;
  const LossFunction loss = [&](const std::vector<c10::IValue>& outputs) {
    const at::Tensor out = outputs.at(0).toTensor();
    output.emplace(out.getIntrusivePtr());
    // Scaling by a number saves nothing of `out` for the backward.
    at::Tensor scaled = out * 2.0;
    scaled.register_hook([&](const at::Tensor&) { alive_in_backward = !output->expired(); });
    return scaled.sum();
  };
  core.forward_backward(m.inputs, loss);
  ASSERT_TRUE(alive_in_backward.has_value()) << "the hook on the loss's input never ran";
  EXPECT_FALSE(*alive_in_backward) << "the output was still held during the backward";
}

// A start spread over a CPU and a GPU times each op on the one kind it runs on; the all-on-GPU
// placement after it must be profiled for the ops that ran on the CPU (the simulator warm start
// waits for them: docs/gpu-runs/2026-11-27-3.md), and a request crossing profiles already sent for
// every op where it puts it is not run again.
TEST(JobCore, ProfilesSentCountOpByOpAndKindByKind) {
  JobCore core;
  core.devices = DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 34, 1.0}, {DeviceKind::kCuda, 0, 1ull << 34, 1.0}}, 10e9,
      1e-5);
  const auto in_force = [](uint64_t generation, std::vector<int> device_of_op) {
    JobCore::InForce d;
    d.generation = generation;
    d.directive.placement.device_of_op = std::move(device_of_op);
    return d;
  };
  const JobCore::InForce interleaved = in_force(1, {0, 1, 0, 1});
  EXPECT_FALSE(core.profiles_on_their_way(interleaved)) << "nothing sent yet";
  core.note_profiles_sent(interleaved);
  EXPECT_TRUE(core.profiles_on_their_way(interleaved));
  EXPECT_TRUE(core.profiles_on_their_way(in_force(1, {0, 1, 0, 1})));
  EXPECT_FALSE(core.profiles_on_their_way(in_force(1, {1, 1, 1, 1})))
      << "ops 0 and 2 were timed on the CPU only, though both kinds were";
  EXPECT_FALSE(core.profiles_on_their_way(in_force(1, {0, 0, 0, 0})));
  core.note_profiles_sent(in_force(1, {1, 1, 1, 1}));
  EXPECT_TRUE(core.profiles_on_their_way(in_force(1, {1, 1, 1, 1})));
  EXPECT_TRUE(core.profiles_on_their_way(in_force(1, {0, 1, 1, 1})))
      << "op 0 has its CPU profile on the way, and every op its GPU one";
  EXPECT_FALSE(core.profiles_on_their_way(in_force(2, {1, 1, 1, 1})))
      << "another attachment's session was sent nothing";
  core.note_profiles_sent(in_force(2, {0, 0, 0, 0}));
  EXPECT_FALSE(core.profiles_on_their_way(in_force(2, {1, 1, 1, 1})))
      << "a new attachment forgets what the last one was sent";
}

}  // namespace
}  // namespace placement::detail
