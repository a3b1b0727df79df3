#pragma once
// The op program: placementd's own IR of a model's forward pass, built by a front end (TorchScript
// or torch.export) and run op by op by capture, the placed engine and the profiler. Operators are
// called through the c10 dispatcher's boxed path, so autograd records them as eager PyTorch does.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

namespace placement::detail {

/// Where one input of a node comes from: a value slot of the program (another node's output, a
/// program input, a module tensor) or a constant.
struct OpInput {
  int value = -1;  // slot, or -1 for a constant
  c10::IValue constant;
  /// Whether what arrives here may hold tensors inside a list or tuple (an LSTM's weights, the
  /// indices of aten::index): the engine moves those one by one.
  bool nested_tensors = false;

  static OpInput slot(int value, bool nested_tensors = false) {
    return {value, {}, nested_tensors};
  }
  static OpInput of(c10::IValue constant) { return {-1, std::move(constant), false}; }
};

struct OpNode {
  enum class Kind {
    kOperator,        // a dispatcher operator (handle), or one outside it (call): TorchScript's own
    kListConstruct,   // inputs -> one list of element_type
    kListUnpack,      // one list -> its elements
    kTupleConstruct,  // inputs -> one tuple
    kTupleUnpack,     // one tuple -> its elements
    kTupleIndex,      // (tuple, index) -> element
    kDictConstruct,   // key, value, key, value ... -> dict of element_type (key) and value_type
  };
  Kind kind = Kind::kOperator;
  /// "aten::linear": the op's kind in the captured graph and in errors.
  std::string name;
  std::optional<c10::OperatorHandle> handle;
  /// Set when the operator is not the dispatcher's (TorchScript's prim ops, symbolic integer
  /// arithmetic of torch.export): called on the stack as the handle would be.
  std::function<void(torch::jit::Stack&)> call;
  std::vector<OpInput> inputs;
  std::vector<int> outputs;
  /// Per output: whether it may hold tensors (module state flows through it).
  std::vector<bool> outputs_hold_tensors;
  c10::TypePtr element_type;
  c10::TypePtr value_type;
  /// Computes tensors: becomes an op of the captured graph, placed on a device.
  bool tensor_op = false;
  /// "encoder.layers.0.attn": the module the op runs in ("" at the top level).
  std::string scope;
  /// Where in the user's code the op comes from (a source line), for errors; may be empty.
  std::string source;
};

/// A tensor as a torch.export program records it from its example run: shape and strides (a
/// dynamic size at the example's value, -1 where the program has none) and dtype.
struct RecordedTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;

  bool known() const;
};

/// Whether what torch.export records of `op`'s outputs is what the op computes. False for the
/// fused recurrent ops: torch 2.11 records an LSTM's final states as [1, layers, batch, hidden]
/// where the op returns [layers, batch, hidden].
bool records_outputs_faithfully(const std::string& op);

class OpProgram {
 public:
  using Hook = std::function<void(const OpNode&, std::vector<c10::IValue>&)>;

  /// Which front end built it: "torchscript" or "export".
  std::string frontend;
  /// What the program was built from (a file name), for errors.
  std::string origin;
  std::vector<OpNode> nodes;
  size_t num_values = 0;
  /// Slots of the inputs forward() takes, in order.
  std::vector<int> inputs;
  /// What the program records of the tensor in each slot (torch.export's tensor_values), by slot;
  /// empty for TorchScript, which records no shapes.
  std::unordered_map<int, RecordedTensor> recorded;
  /// The outputs, in order (a slot or a constant).
  std::vector<OpInput> outputs;
  /// Slots that hold the module's own objects (parameters, buffers, lists of them): bound before
  /// every run. The tensors are the module's, so moving them in place moves what the program reads.
  std::vector<std::pair<int, c10::IValue>> bound;
  /// The trainable parameters, each once, with their names (parallel lists), and the buffers.
  std::vector<at::Tensor> parameters;
  std::vector<std::string> parameter_names;
  std::vector<std::pair<std::string, at::Tensor>> buffers;
  /// After a run, buffers the graph returns new values for (a functional export) are copied
  /// from these output positions; they are not among what run() returns.
  std::vector<std::pair<size_t, at::Tensor>> buffer_updates;
  /// What the nodes' calls may point into (TorchScript's graph), kept alive with the program.
  std::shared_ptr<const void> keep_alive;

  /// Once the nodes are complete (front ends call it): checks them (validate), finds the module
  /// tensors each tensor op reads (find_module_state) and when each value is last read.
  void complete();
  /// Finds, for each tensor op, the module tensors it reads (directly, or through lists and tuples
  /// built from them), each once.
  void find_module_state();
  /// The module tensors node `index` reads; empty for other nodes.
  const std::vector<at::Tensor>& module_state_read_by(size_t index) const;
  /// The last node that reads `slot` (or makes it, when nothing reads it); kKeptToTheEnd for the
  /// program's outputs and the module's own slots, which run() never lets go of.
  static constexpr size_t kKeptToTheEnd = static_cast<size_t>(-1);
  size_t last_read(int slot) const;

  /// Whether `inputs` are the example the program records (each a tensor of the recorded shape and
  /// dtype): then every value a run computes is as recorded.
  bool records(const std::vector<c10::IValue>& inputs) const;

  /// "aten::linear in layer1" (and the source line, when known).
  std::string describe(const OpNode& node) const;

  /// Runs the nodes in order on `inputs`. `before` may rewrite a node's input stack (the engine
  /// moves tensors to the op's device there); `after` sees its outputs. Throws CaptureError
  /// naming the node when an op fails. On meta inputs, an op without a meta kernel yields meta
  /// tensors of the shapes the program records for its outputs when the inputs are its recorded
  /// example (and the record is faithful); otherwise it runs on CPU zeros of its inputs' shapes.
  std::vector<c10::IValue> run(const std::vector<c10::IValue>& inputs, const Hook& before = {},
                               const Hook& after = {}) const;

  /// Checks slots, arities and that every operator can be called; throws CaptureError naming the
  /// node.
  void validate() const;

 private:
  std::vector<std::vector<at::Tensor>> state_read_;
  // Per node, the slots no later node and no output reads: run() lets go of them once the node
  // has run, as eager Python drops a temporary, so the forward holds only what autograd saved and
  // what is still to be read. Kept to the end, a GPT-2's forward held every temporary and its
  // backward then allocated fresh pages (+17% a step on a CPU; issue #40's benchmark).
  std::vector<std::vector<int>> released_after_;
  std::vector<size_t> last_read_;
};

/// Runs one node on its input stack, leaving its outputs there (what OpProgram::run does per node,
/// without hooks): the engine runs an op again to recompute its outputs.
void call(const OpNode& node, std::vector<c10::IValue>& stack);

/// The dispatcher's operator `name` ("aten::linear") with `overload` ("" for the default), or
/// nullopt when this LibTorch has none.
std::optional<c10::OperatorHandle> find_operator(const std::string& name,
                                                 const std::string& overload);

}  // namespace placement::detail
