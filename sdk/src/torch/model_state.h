#pragma once
// What a pass of the model changes besides its outputs and gradients: the buffers its ops write in
// place (batch norm's running statistics, num_batches_tracked) and the default random number
// generators (dropout masks). Restoring a snapshot taken before a pass makes it as if the pass had
// not run. Capture runs the model once without training it; a step that failed under one of
// placementd's placements is run again from the state it began with, so the retry changes nothing
// a second time (eager PyTorch would have run that batch once).

#include <mutex>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace placement::detail {

class ModelState {
 public:
  /// Copies of `buffers` (meta ones have no values to keep) and the generators' states.
  explicit ModelState(const std::vector<std::pair<std::string, at::Tensor>>& buffers) {
    generators_.push_back(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)));
    if (at::hasCUDA())
      for (c10::DeviceIndex i = 0; i < at::detail::getCUDAHooks().deviceCount(); ++i)
        generators_.push_back(at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, i)));
    for (at::Generator& g : generators_) {
      std::lock_guard<std::mutex> lock(g.mutex());
      generator_states_.push_back(g.get_state());
    }
    at::NoGradGuard no_grad;
    for (const auto& [name, buffer] : buffers) {
      if (buffer.is_meta()) continue;
      buffers_.push_back(buffer);
      values_.push_back(buffer.clone());
    }
  }

  /// Puts the values back into the same tensors (in place: wherever a placement change moved them
  /// since, with set_data, the module and the optimizer still hold these).
  void restore() const {
    for (size_t i = 0; i < generators_.size(); ++i) {
      at::Generator generator = generators_[i];  // a handle: the default generator itself
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(generator_states_[i]);
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      at::Tensor buffer = buffers_[i];
      buffer.copy_(values_[i]);
    }
  }

 private:
  std::vector<at::Generator> generators_;
  std::vector<at::Tensor> generator_states_;
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> values_;
};

}  // namespace placement::detail
