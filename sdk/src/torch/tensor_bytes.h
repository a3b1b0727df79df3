#pragma once
// The tensors an IValue holds and their bytes: what capture records per op output and what the
// memory limit charges a device for.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace placement::detail {

/// Every tensor an IValue holds directly or in a list, tuple or dict.
inline void tensors_in(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor()) out.push_back(value.toTensor());
  else if (value.isTensorList())
    for (const at::Tensor& t : value.toTensorList().vec()) out.push_back(t);
  else if (value.isList())
    for (const c10::IValue& v : value.toListRef()) tensors_in(v, out);
  else if (value.isTuple())
    for (const c10::IValue& v : value.toTupleRef().elements()) tensors_in(v, out);
  else if (value.isGenericDict())
    for (const auto& entry : value.toGenericDict()) tensors_in(entry.value(), out);
}

/// Bytes of the defined tensors `value` holds.
inline uint64_t bytes_of(const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  tensors_in(value, tensors);
  uint64_t total = 0;
  for (const auto& t : tensors)
    if (t.defined()) total += static_cast<uint64_t>(t.numel()) * t.element_size();
  return total;
}

}  // namespace placement::detail
