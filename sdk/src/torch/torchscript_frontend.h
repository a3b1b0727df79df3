#pragma once
// TorchScript -> OpProgram: the forward graph inlined (with each call's module path as scope),
// attribute reads resolved to the module's own tensors, checked for what cannot be placed (control
// flow). Kept while upstream ships TorchScript; torch.export is the default front end.

#include <torch/csrc/jit/api/module.h>

#include "op_program.h"

namespace placement::detail {

/// Throws CaptureError on control flow or an op without an implementation.
OpProgram from_torchscript(const torch::jit::Module& module);

}  // namespace placement::detail
