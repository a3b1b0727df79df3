#pragma once
// What a job's logical CPU devices hold, measured and held to limits: an out-of-memory that
// logical devices can have, as a GPU's allocator gives one, so CI (and anyone emulating GPU
// capacities on one host) runs the same failure path, and a measured peak per device the memory
// model is scored against. GPUs have their allocator for both.

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "memory_tally.h"
#include "placement/engine.h"
#include "placement/step_optimizer.h"

namespace placement::detail {

class DeviceMemory {
 public:
  /// limits[d] bytes for logical device d of `module` (0: no limit; CUDA devices are left to their
  /// allocator). Counts from now on what the module's steps allocate on each device.
  DeviceMemory(PlacedModule& module, std::vector<uint64_t> limits);
  ~DeviceMemory();

  /// A step's forward and backward begin: what lives on each device between steps (parameters and
  /// buffers at home, their gradients, proxies, the optimizer's state) is counted where it lives,
  /// the peaks start from there, and the limits hold until end_step(): an allocation past one
  /// throws c10::OutOfMemoryError ("out of memory on cpu:1 (its memory limit): ...").
  void begin_step(StepOptimizer& optimizer);
  void end_step();
  /// The most each device held during the last step (0 for devices not counted).
  std::vector<uint64_t> peaks() const;

 private:
  /// Throws c10::OutOfMemoryError before the step runs when what lives on a device past the step
  /// (what it holds, the gradients to come, the optimizer's state its first update makes, as
  /// StepOptimizer::expected_state_bytes says) is already more than its limit.
  void refuse_what_cannot_fit(StepOptimizer& optimizer, const std::vector<at::Tensor>& held,
                              const std::vector<int>& homes,
                              const std::vector<std::vector<at::Tensor>>& state);

  PlacedModule& module_;
  std::vector<std::string> names_;
  std::vector<uint64_t> limits_;
  MemoryTally tally_;
  /// The module's parameters that an op of its graph reads (refuse_what_cannot_fit's lower bound).
  std::unordered_set<const c10::TensorImpl*> read_parameters_;
};

}  // namespace placement::detail
