#pragma once
// A TorchScript forward graph prepared for op-by-op execution: inlined, attribute reads resolved,
// checked for what we cannot run (control flow). Shared by capture and the placed engine.

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

namespace placement::detail {

class Program {
 public:
  /// Copies and inlines the module's forward graph. Throws CaptureError on control flow or an op
  /// without an implementation.
  explicit Program(const torch::jit::Module& module);

  const torch::jit::Graph& graph() const { return *graph_; }
  /// Number of inputs forward() takes (without `self`).
  size_t num_inputs() const { return graph_->inputs().size() - 1; }

  /// "encoder.0" for a node inlined from that submodule's forward ("" at the top level): the full
  /// attribute path, which TorchScript's own inliner does not keep (it records only the last
  /// attribute name, so encoder.0 and decoder.0 would both read "0").
  std::string scope_of(const torch::jit::Node* node) const;
  /// "aten::linear in layer1" — how errors name a node.
  std::string describe(const torch::jit::Node* node) const;
  /// True for nodes that compute tensors (become ops); false for constants, attribute reads and
  /// list/tuple/scalar plumbing.
  static bool is_tensor_op(const torch::jit::Node* node);
  /// Whether a value of this type can carry tensors: a tensor, or a list, tuple, dict or optional
  /// holding them.
  static bool may_hold_tensors(const c10::TypePtr& type);

  /// The module's own tensors (parameters, buffers, other tensor attributes) that a tensor op
  /// reads, whether straight from an attribute or through lists and tuples built from attributes
  /// (aten::lstm, gru and rnn_* take their weights as one list), each once, in input order. Empty
  /// for other nodes. The tensors are the module's: their TensorImpls identify them.
  const std::vector<at::Tensor>& module_state_read_by(const torch::jit::Node* node) const;

  /// Runs the graph node by node on `inputs`. `before` may rewrite a node's input stack (the
  /// engine moves tensors to the op's device there); `after` sees its outputs. Throws CaptureError
  /// naming the node when an op fails. On meta inputs (capture of a model saved on the meta
  /// device), an op without a meta kernel in LibTorch runs on CPU zeros of its inputs' shapes and
  /// yields meta tensors of its outputs' shapes.
  using Hook = std::function<void(const torch::jit::Node*, std::vector<c10::IValue>&)>;
  std::vector<c10::IValue> run(const std::vector<c10::IValue>& inputs, const Hook& before = {},
                               const Hook& after = {}) const;

 private:
  void inline_calls();
  void find_module_state();

  torch::jit::Module module_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::unordered_map<const torch::jit::Node*, std::string> scopes_;
  std::unordered_map<const torch::jit::Node*, std::vector<at::Tensor>> state_read_;
};

}  // namespace placement::detail
