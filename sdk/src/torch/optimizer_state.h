#pragma once
// Moving a torch::optim optimizer's per-parameter state (Adam moments, momentum buffers, ...) along
// with its parameters when the placement changes.

#include <cstdint>
#include <unordered_map>
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

/// Logical device of each of the module's parameters.
using ParameterHomes = std::unordered_map<const c10::TensorImpl*, int>;
ParameterHomes parameter_homes(const PlacedModule& module);

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

/// After module.set_placement(): moves the optimizer's state of every parameter whose logical
/// device changed (relative to `before`) to the physical device it now lives on, and drops those
/// parameters' gradients (the step boundary has none worth keeping). Returns bytes copied.
uint64_t migrate_optimizer_state(StepOptimizer& optimizer, const PlacedModule& module,
                                 const ParameterHomes& before);
uint64_t migrate_optimizer_state(torch::optim::Optimizer& optimizer, const PlacedModule& module,
                                 const ParameterHomes& before);

}  // namespace placement
