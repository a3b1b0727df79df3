#include "update_guard.h"

#include <ATen/ATen.h>

namespace placement::detail {

at::Tensor host_copy(const at::Tensor& t) {
  return t.detach().to(t.options().device(at::kCPU), /*non_blocking=*/false, /*copy=*/true);
}

UpdateGuard::UpdateGuard(const std::vector<at::Tensor>& parameters, StepOptimizer& optimizer)
    : state_(optimizer.save_state(parameters)) {
  if (!state_) return;
  bytes_ = state_->bytes;
  at::NoGradGuard no_grad;
  parameters_.reserve(parameters.size());
  values_.reserve(parameters.size());
  for (const at::Tensor& p : parameters) {
    if (p.is_meta()) continue;
    parameters_.push_back(p);
    values_.push_back(host_copy(p));
    bytes_ += static_cast<uint64_t>(p.numel()) * p.element_size();
  }
}

void UpdateGuard::undo() const {
  if (!state_) return;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].detach().copy_(values_[i]);
  state_->restore();
}

}  // namespace placement::detail
