#pragma once
// torch.export's serialized program read into LibTorch's own types: the schema types LibTorch ships
// (torch/csrc/utils/generated_serialization_types.h) for dtypes, layouts, memory formats, sizes and
// constants; the program itself, its schema version checked; and the Python arithmetic on sizes
// that torch.export keeps for dynamic shapes. Errors are CaptureErrors.

#include <functional>
#include <string>

#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <torch/csrc/utils/generated_serialization_types.h>

namespace placement::detail::export_schema {

namespace ex = torch::_export;

c10::ScalarType scalar_type(ex::ScalarType t);
c10::Layout layout(ex::Layout l);
c10::MemoryFormat memory_format(ex::MemoryFormat f);

/// A size as the example had it (a dynamic one's example value), or -1 without one.
int64_t known(const ex::SymInt& s);
/// known(s), or a CaptureError where the size has no example value.
int64_t concrete(const ex::SymInt& s);

/// The operator.* or math.* function a node's target names, over the stack's values; empty for
/// any other target.
std::function<void(torch::jit::Stack&)> symbolic(const std::string& target);

c10::IValue constant_value(const ex::ConstantValue& v);

/// `json` (a .pt2's models/model.json) as an ExportedProgram of this LibTorch's schema version;
/// `origin` names the source in errors.
ex::ExportedProgram parse_program(const std::string& json, const std::string& origin);

}  // namespace placement::detail::export_schema
