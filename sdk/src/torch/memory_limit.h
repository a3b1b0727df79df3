#pragma once
// An out-of-memory that logical CPU devices can have: a per-device byte limit on what a forward
// pass holds there, enforced op by op. GPUs have their allocator for that; this gives CI (and
// anyone emulating GPU capacities on one host) the same failure path.

#include <cstdint>
#include <vector>

#include "placement/engine.h"

namespace placement::detail {

class DeviceMemoryLimit : public OpObserver {
 public:
  /// limits[d] bytes for logical device d of `module` (0: no limit). CUDA devices are left to their
  /// allocator.
  DeviceMemoryLimit(const PlacedModule& module, std::vector<uint64_t> limits);

  /// Starts a forward pass: each device holds its parameters and their gradients.
  void begin_forward();
  void before(int op) override;
  /// Adds the op's outputs to its device's tally; throws std::runtime_error ("out of memory on
  /// cpu:1 ...") once a device holds more than its limit.
  void after(int op, const std::vector<c10::IValue>& outputs) override;

 private:
  const PlacedModule& module_;
  std::vector<uint64_t> limits_;
  std::vector<uint64_t> held_;
};

}  // namespace placement::detail
