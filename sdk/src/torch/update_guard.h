#pragma once
// An optimizer step that can be undone (JobOptions::guarded_updates): before it, the parameters'
// values and the optimizer's state are copied to host memory, where a device the placement filled
// has no say; after a failure the copies go back into the same tensors, so the module and the
// optimizer hold what they held before the step, bit for bit.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "placement/step_optimizer.h"

namespace placement::detail {

class UpdateGuard {
 public:
  /// Copies `parameters` and their state in `optimizer`. Throws, with nothing changed, when a copy
  /// fails. armed() is false when the optimizer cannot save its state (StepOptimizer::save_state):
  /// then nothing is copied and the update cannot be undone.
  UpdateGuard(const std::vector<at::Tensor>& parameters, StepOptimizer& optimizer);
  bool armed() const { return state_.has_value(); }
  /// Puts values and state back. Copies into tensors that exist: nothing to allocate on a device.
  void undo() const;
  /// What the copies hold, in bytes.
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> values_;
  std::optional<StepOptimizer::SavedState> state_;
  uint64_t bytes_ = 0;
};

/// A copy of `t` in host memory (a new tensor even when `t` is there already).
at::Tensor host_copy(const at::Tensor& t);

}  // namespace placement::detail
