#pragma once
// The tensors an IValue holds and their bytes: what capture records per op output and what the
// memory limit charges a device for; and copies with those tensors replaced (the engine moving an
// op's inputs, capture's meta fallback).

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace placement::detail {

/// Every tensor an IValue holds directly or in a list, tuple or dict.
inline void tensors_in(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor())
    out.push_back(value.toTensor());
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

/// A copy of `value` with each defined tensor replaced by fn(tensor), through lists, tuples and
/// dicts; anything else as it is.
inline c10::IValue map_tensors(const c10::IValue& value,
                               const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (value.isTensor())
    return value.toTensor().defined() ? c10::IValue(fn(value.toTensor())) : value;
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : value.toTensorList().vec()) list.push_back(t.defined() ? fn(t) : t);
    return list;
  }
  if (value.isList()) {
    c10::impl::GenericList list(value.toList().elementType());
    for (const c10::IValue& v : value.toListRef()) list.push_back(map_tensors(v, fn));
    return list;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& v : value.toTupleRef().elements()) items.push_back(map_tensors(v, fn));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (value.isGenericDict()) {
    c10::impl::GenericDict dict(value.toGenericDict().keyType(), value.toGenericDict().valueType());
    for (const auto& entry : value.toGenericDict())
      dict.insert_or_assign(entry.key(), map_tensors(entry.value(), fn));
    return dict;
  }
  return value;
}

}  // namespace placement::detail
