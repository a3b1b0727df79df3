#include "memory_limit.h"

#include <stdexcept>
#include <string>

#include <ATen/core/ivalue.h>
#include <ATen/core/Tensor.h>

namespace placement::detail {

namespace {

uint64_t tensor_bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? static_cast<uint64_t>(t.numel()) * t.element_size() : 0;
  }
  uint64_t sum = 0;
  if (v.isTensorList())
    for (const at::Tensor& t : v.toTensorVector()) sum += static_cast<uint64_t>(t.numel()) * t.element_size();
  else if (v.isTuple())
    for (const c10::IValue& e : v.toTupleRef().elements()) sum += tensor_bytes(e);
  else if (v.isList())
    for (const c10::IValue& e : v.toListRef()) sum += tensor_bytes(e);
  return sum;
}

}  // namespace

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
  const size_t d = static_cast<size_t>(module_.placement().device_of_op.at(static_cast<size_t>(op)));
  for (const c10::IValue& v : outputs) held_[d] += tensor_bytes(v);
  if (limits_[d] > 0 && held_[d] > limits_[d])
    throw std::runtime_error("out of memory on " + module_.devices().devices[d].name() + " (its memory limit): op " +
                             std::to_string(op) + " '" + module_.graph().ops[static_cast<size_t>(op)].name +
                             "' brings what the device holds to " + std::to_string(held_[d]) + " bytes, limit " +
                             std::to_string(limits_[d]));
}

}  // namespace placement::detail
