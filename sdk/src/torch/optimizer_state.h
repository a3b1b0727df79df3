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

namespace torch::optim {
class Optimizer;
}

namespace placement {

/// Logical device of each of the module's parameters.
using ParameterHomes = std::unordered_map<const c10::TensorImpl*, int>;
ParameterHomes parameter_homes(const PlacedModule& module);

/// After module.set_placement(): the parameters whose logical device changed (relative to
/// `before`), and the physical device each now lives on.
struct MovedParameters {
  std::vector<at::Tensor> parameters;
  std::vector<c10::Device> devices;
};
MovedParameters moved_parameters(const PlacedModule& module, const ParameterHomes& before);

/// Copies the state of each moved parameter to its new device. All copies are made before any is
/// installed, so a failure (out of memory, a state type it cannot move) changes nothing and
/// throws. Returns bytes copied.
uint64_t move_optimizer_state(torch::optim::Optimizer& optimizer, const MovedParameters& moved);

/// moved_parameters, move_optimizer_state, and the gradients of moved parameters dropped (the
/// step boundary has none worth keeping). Returns bytes copied.
uint64_t migrate_optimizer_state(torch::optim::Optimizer& optimizer, const PlacedModule& module,
                                 const ParameterHomes& before);

}  // namespace placement
