#pragma once
// Moving a torch::optim optimizer's per-parameter state (Adam moments, momentum buffers, ...) along
// with its parameters when the placement changes.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorImpl.h>

#include "placement/engine.h"
#include "placement/step_optimizer.h"

namespace torch::optim {
class Optimizer;
}

namespace placement {

/// A torch::optim optimizer as Job::step drives it: its state found under each parameter's
/// TensorImpl and copied by type (Adam, AdamW, SGD, RMSprop, Adagrad).
class TorchStepOptimizer final : public StepOptimizer {
 public:
  explicit TorchStepOptimizer(torch::optim::Optimizer& optimizer) : optimizer_(optimizer) {}
  void step() override;
  void zero_grad() override;
  /// All copies are made before any is installed, so a failure (out of memory, a state type it
  /// cannot move) changes nothing and throws.
  uint64_t move_state(const std::vector<at::Tensor>& parameters,
                      const std::vector<c10::Device>& devices) override;
  std::optional<StagedState> stage_state(const std::vector<at::Tensor>& parameters,
                                         const std::vector<c10::Device>& devices) override;
  std::vector<std::vector<at::Tensor>> state_tensors(
      const std::vector<at::Tensor>& parameters) override;
  /// By the options of the parameter's group: Adam and AdamW 2 (3 with amsgrad) times its bytes,
  /// SGD 1 with momentum (else 0), RMSprop 1 (+1 with momentum, +1 centered), Adagrad 1.
  std::optional<uint64_t> expected_state_bytes(const at::Tensor& parameter) override;
  /// torch::optim's Adam, AdamW, SGD, RMSprop and Adagrad themselves (not subclasses).
  bool steps_parameters_apart() const override;
  /// Each group's step() over those of `parameters` it holds.
  void step_parameters(const std::vector<at::Tensor>& parameters) override;
  /// Host copies of the state's tensors, and its counts (Adam's step) by value.
  std::optional<SavedState> save_state(const std::vector<at::Tensor>& parameters) override;

 private:
  torch::optim::Optimizer& optimizer_;
};

/// What a placement change moved: the module's tensors, and the optimizer's state of the
/// parameters that changed logical device (bytes).
struct PlacementMove {
  MigrationStats module;
  uint64_t state_bytes = 0;
};

/// A placement change with the optimizer's state, every copy made and nothing installed yet.
struct StagedMove {
  PlacedModule::Staged module;
  /// The parameters that change logical device, and the physical device each will live on.
  std::vector<at::Tensor> moving;
  std::vector<c10::Device> devices;
  /// nullopt: the optimizer cannot stage (StepOptimizer::stage_state), and moves its state at
  /// the commit.
  std::optional<StepOptimizer::StagedState> state;
  /// How long the copies took.
  double seconds = 0.0;
};

/// Copies the parameters and buffers that `placement` moves (PlacedModule::stage) and the
/// optimizer's state of every parameter that changes logical device (StepOptimizer::stage_state),
/// to where each will live. Throws with nothing changed when a copy fails.
StagedMove stage_with_state(PlacedModule& module, StepOptimizer& optimizer,
                            const Placement& placement);
/// Installs a staged move: the state, then the module's tensors (no copies: neither fails), and
/// drops the moved parameters' gradients (a step boundary has none worth keeping). When the
/// optimizer could not stage, its move_state runs first, and a failure there throws with nothing
/// changed.
PlacementMove commit(PlacedModule& module, StepOptimizer& optimizer, StagedMove staged);
/// Both: a failure at any point leaves parameters and state where they were, so nothing ever has
/// to move back (a move back can fail too).
PlacementMove move_with_state(PlacedModule& module, StepOptimizer& optimizer,
                              const Placement& placement);
PlacementMove move_with_state(PlacedModule& module, torch::optim::Optimizer& optimizer,
                              const Placement& placement);

}  // namespace placement
