#pragma once
// Moving a torch::optim optimizer's per-parameter state (Adam moments, momentum buffers, ...) along
// with its parameters when the placement changes.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorImpl.h>

#include "placement/engine.h"
#include "placement/job.h"

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

 private:
  torch::optim::Optimizer& optimizer_;
};

/// What a placement change moved: the module's tensors, and the optimizer's state of the
/// parameters that changed logical device (bytes).
struct PlacementMove {
  MigrationStats module;
  uint64_t state_bytes = 0;
};

/// Moves `module` to `placement` together with the optimizer's state, all or nothing: the
/// parameters' copies are made first (PlacedModule::stage), then the state of every parameter
/// that changes logical device is copied to the physical device it will live on and installed
/// (StepOptimizer::move_state, all or nothing), then the parameters switch over
/// (PlacedModule::commit, which cannot fail). A failure throws with nothing changed, so nothing
/// ever has to move back (a move back can fail too). The moved parameters' gradients are dropped:
/// a step boundary has none worth keeping.
PlacementMove move_with_state(PlacedModule& module, StepOptimizer& optimizer,
                              const Placement& placement);
PlacementMove move_with_state(PlacedModule& module, torch::optim::Optimizer& optimizer,
                              const Placement& placement);

}  // namespace placement
