#include "memory_limit.h"

#include <stdexcept>
#include <string>

#include "tensor_bytes.h"

namespace placement::detail {

DeviceMemoryLimit::DeviceMemoryLimit(const PlacedModule& module, std::vector<uint64_t> limits)
    : module_(module), limits_(std::move(limits)) {
  limits_.resize(module_.devices().size(), 0);
  for (size_t d = 0; d < limits_.size(); ++d)
    if (module_.devices().devices[d].kind != DeviceKind::kCpu) limits_[d] = 0;
}

void DeviceMemoryLimit::begin_forward() {
  held_.assign(limits_.size(), 0);
  for (const at::Tensor& p : module_.parameters())
    if (const std::optional<int> d = module_.device_of(p))
      held_[static_cast<size_t>(*d)] += 2 * static_cast<uint64_t>(p.numel()) * p.element_size();
}

void DeviceMemoryLimit::before(int) {}

void DeviceMemoryLimit::after(int op, const std::vector<c10::IValue>& outputs) {
  const size_t d =
      static_cast<size_t>(module_.placement().device_of_op.at(static_cast<size_t>(op)));
  for (const c10::IValue& v : outputs) held_[d] += bytes_of(v);
  if (limits_[d] > 0 && held_[d] > limits_[d])
    throw std::runtime_error("out of memory on " + module_.devices().devices[d].name() +
                             " (its memory limit): op " + std::to_string(op) + " '" +
                             module_.graph().ops[static_cast<size_t>(op)].name +
                             "' brings what the device holds to " + std::to_string(held_[d]) +
                             " bytes, limit " + std::to_string(limits_[d]));
}

}  // namespace placement::detail
