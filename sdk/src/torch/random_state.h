#pragma once
// The default random number generators' states, put back when this goes out of scope: a pass of
// the model that is not a training step (capture) must not move the dropout masks the job's real
// steps draw. (A step retried after a failed candidate does not use it yet: issue #41.)

#include <vector>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace placement::detail {

class RandomState {
 public:
  RandomState() {
    generators_.push_back(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)));
    if (at::hasCUDA())
      for (c10::DeviceIndex i = 0; i < at::detail::getCUDAHooks().deviceCount(); ++i)
        generators_.push_back(at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, i)));
    for (at::Generator& g : generators_) {
      std::lock_guard<std::mutex> lock(g.mutex());
      states_.push_back(g.get_state());
    }
  }
  ~RandomState() {
    for (size_t i = 0; i < generators_.size(); ++i) {
      std::lock_guard<std::mutex> lock(generators_[i].mutex());
      generators_[i].set_state(states_[i]);
    }
  }
  RandomState(const RandomState&) = delete;
  RandomState& operator=(const RandomState&) = delete;

 private:
  std::vector<at::Generator> generators_;
  std::vector<at::Tensor> states_;
};

}  // namespace placement::detail
