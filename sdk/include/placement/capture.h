#pragma once
// A model (torch.export or TorchScript) -> OpGraph. Implemented in libplacement_torch (links
// LibTorch); this header does not include LibTorch, so code that only passes a module through stays
// cheap to compile.

#include <cstdint>
#include <string>
#include <vector>

#include "placement/capture_error.h"
#include "placement/graph.h"
#include "placement/model.h"
#include "placement/torch_fwd.h"

namespace placement {

/// Captures the forward graph of `module` as the example `inputs` flow through it: the graph is
/// inlined, each tensor operation becomes an op named after its module scope
/// ("layer1.0.conv1/conv2d"), parameters and buffers become parameter bytes of their first
/// consumer, constants and list/tuple plumbing are folded away, and every output's shape, dtype
/// and bytes are those measured on the example inputs. Throws CaptureError for control flow
/// (script the model with tracing instead), unsupported ops, or inputs the model rejects.
/// The module is run once without gradients; its parameters are not changed.
/// The model's buffers and the random number generators are as they were afterwards (a model in
/// train mode updates batch norm's statistics and draws dropout masks): a captured model trains
/// from the state it was given, as plain PyTorch would.
OpGraph capture(const Model& model, const std::vector<at::Tensor>& inputs,
                const std::string& name = "");
/// The same for a TorchScript module.
OpGraph capture(const torch::jit::Module& module, const std::vector<at::Tensor>& inputs,
                const std::string& name = "");

/// Example inputs of the given shapes: random normal floats, or random integers in [0, 100) for
/// integer dtypes (token ids). `dtype` is "float32", "float64", "int64" or "int32". `meta`: on
/// the meta device, shapes without storage.
std::vector<at::Tensor> example_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                       const std::string& dtype, bool meta = false);

/// The example inputs capture_file captures `model` on (on the meta device when the model is): of
/// the given shapes, or of those a .pt2 records of the example it was exported with when none are
/// given; each input of the recorded dtype unless `dtype` is given for all (a TorchScript model
/// records neither: shapes are needed, dtype defaults to float32).
std::vector<at::Tensor> example_inputs(const Model& model,
                                       std::vector<std::vector<int64_t>> shapes = {},
                                       const std::string& dtype = "");

/// Whether the module's parameters or buffers live on the meta device (a model built under
/// `with torch.device("meta")` and traced there): it has shapes but no weights.
bool on_meta_device(const torch::jit::Module& module);

/// Loads a .pt2 archive (torch.export.save; its weights are not read) or a TorchScript file
/// (torch.jit.save / torch::jit::save) and captures it on example_inputs(model, shapes, dtype).
/// A .pt2, or a TorchScript model saved on the meta device, is captured on meta tensors:
/// every op's shapes and work are recorded without computing anything or holding any activation,
/// which is how models larger than this machine's memory are captured. Errors name the file.
OpGraph capture_file(const std::string& path, const std::vector<std::vector<int64_t>>& shapes = {},
                     const std::string& dtype = "");

}  // namespace placement
