#include "placement/capture.h"
#include "placement/op_work.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/csrc/jit/serialization/import.h>

#include "export_frontend.h"
#include "model_state.h"
#include "op_program.h"
#include "tensor_bytes.h"

namespace placement {

using detail::OpInput;
using detail::OpNode;
using detail::OpProgram;
using detail::RecordedTensor;

namespace {

using detail::tensors_in;

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Short:
      return "int16";
    case c10::ScalarType::Char:
      return "int8";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Bool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

TensorInfo describe_tensor(const at::Tensor& t) {
  TensorInfo info;
  info.shape.assign(t.sizes().begin(), t.sizes().end());
  info.dtype = dtype_name(t.scalar_type());
  info.bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
  return info;
}
// An op input as the cost model sees it.
OpArgument describe_argument(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.defined() ? OpArgument::tensor(describe_tensor(t)) : OpArgument{};
  }
  if (value.isInt()) return OpArgument::integer(value.toInt());
  if (value.isIntList()) return OpArgument::integers(value.toIntVector());
  if (value.isBool()) return OpArgument::boolean(value.toBool());
  if (value.isString()) return OpArgument::string(value.toStringRef());
  if (value.isNone()) return OpArgument{};
  if (value.isDouble()) {
    OpArgument a;
    a.type = OpArgument::Type::kFloat;
    a.number = value.toDouble();
    return a;
  }
  std::vector<at::Tensor> tensors;
  detail::tensors_in(value, tensors);
  if (tensors.empty()) {
    OpArgument a;
    a.type = OpArgument::Type::kOther;
    return a;
  }
  std::vector<TensorInfo> infos;
  for (const at::Tensor& t : tensors)
    if (t.defined()) infos.push_back(describe_tensor(t));
  return OpArgument::tensor_list(std::move(infos));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + (d < 0 ? "?" : std::to_string(d));
  return text.empty() ? "scalar" : text;
}

c10::ScalarType input_dtype(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "float64") return at::kDouble;
  if (dtype == "int64") return at::kLong;
  if (dtype == "int32") return at::kInt;
  throw CaptureError("unknown input dtype '" + dtype + "' (float32, float64, int64 or int32)");
}

at::Tensor example_input(const std::vector<int64_t>& shape, c10::ScalarType dtype, bool meta) {
  for (int64_t d : shape)
    if (d <= 0) throw CaptureError("input shape dimensions must be positive");
  const at::TensorOptions on = at::TensorOptions().device(meta ? at::kMeta : at::kCPU).dtype(dtype);
  if (c10::isFloatingType(dtype)) return at::randn(shape, on);
  if (dtype == at::kBool) return at::randint(0, 2, shape, on);
  return at::randint(0, 100, shape, on);
}

// The trained parameters and the ops that read each, the tensor ops numbered as the graph's ops.
std::vector<Parameter> parameter_table(const OpProgram& program) {
  std::vector<Parameter> table(program.parameters.size());
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  for (size_t k = 0; k < program.parameters.size(); ++k) {
    const at::Tensor& p = program.parameters[k];
    table[k].name = k < program.parameter_names.size() ? program.parameter_names[k] : "";
    table[k].bytes = static_cast<uint64_t>(p.numel()) * p.element_size();
    index.emplace(p.unsafeGetTensorImpl(), k);
  }
  int op = 0;
  for (size_t node = 0; node < program.nodes.size(); ++node) {
    if (!program.nodes[node].tensor_op) continue;
    for (const at::Tensor& t : program.module_state_read_by(node))
      if (const auto it = index.find(t.unsafeGetTensorImpl()); it != index.end())
        table[it->second].readers.push_back(op);
    ++op;
  }
  return table;
}

}  // namespace

OpGraph capture(const Model& model, const std::vector<at::Tensor>& inputs,
                const std::string& name) {
  const OpProgram& program = model.program();
  OpGraph graph;
  graph.name = name;

  // Which ops produced each value slot: itself for a tensor op, the union of its inputs' producers
  // for plumbing (a list of tensors depends on every op that made one of them).
  std::vector<std::vector<int>> producers(program.num_values);
  std::unordered_set<const c10::TensorImpl*> counted_parameters;
  std::map<std::pair<int, int>, uint64_t> edges;
  std::map<std::string, int> names_used;
  int current = -1;
  int current_trained_tensors = 0;
  std::vector<OpArgument> current_arguments;
  auto index_of = [&program](const OpNode& node) {
    return static_cast<size_t>(&node - program.nodes.data());
  };

  // Bytes of what an input carries from other ops, without module tensors a list may hold beside
  // them.
  auto activation_bytes = [&counted_parameters](const c10::IValue& value) {
    std::vector<at::Tensor> tensors;
    tensors_in(value, tensors);
    uint64_t total = 0;
    for (const at::Tensor& t : tensors)
      if (t.defined() && !counted_parameters.count(t.unsafeGetTensorImpl()))
        total += static_cast<uint64_t>(t.numel()) * t.element_size();
    return total;
  };
  auto before = [&](const OpNode& node, std::vector<c10::IValue>& stack) {
    current = -1;
    if (!node.tensor_op) return;
    Op op;
    op.id = static_cast<int>(graph.ops.size());
    op.kind = node.name;
    const std::string short_kind =
        node.name.substr(node.name.find("::") == std::string::npos ? 0 : node.name.find("::") + 2);
    std::string base = (node.scope.empty() ? "" : node.scope + "/") + short_kind;
    const int seen = names_used[base]++;
    op.name = seen == 0 ? base : base + "." + std::to_string(seen);
    // The module's tensors it reads, directly or through a list (an LSTM's weights): they live with
    // their first consumer, and are no edge.
    current_trained_tensors = 0;
    for (const at::Tensor& t : program.module_state_read_by(index_of(node)))
      if (counted_parameters.insert(t.unsafeGetTensorImpl()).second) {
        op.parameter_bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
        current_trained_tensors += t.requires_grad() ? 1 : 0;
      }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].value < 0) continue;  // a constant
      const std::vector<int>& from = producers[static_cast<size_t>(node.inputs[i].value)];
      if (from.empty()) continue;  // a graph input or the module's own tensors
      const uint64_t bytes = activation_bytes(stack[i]);
      for (int src : from) {
        uint64_t& b = edges[{src, op.id}];
        // A list input carries several producers' tensors; each edge gets that producer's share.
        const uint64_t share = from.size() == 1 ? bytes : graph.ops[src].output_bytes();
        b = std::max(b, share);
      }
    }
    current_arguments.clear();
    for (const c10::IValue& value : stack) current_arguments.push_back(describe_argument(value));
    current = op.id;
    graph.ops.push_back(std::move(op));
  };
  auto after = [&](const OpNode& node, std::vector<c10::IValue>& stack) {
    if (current < 0) {
      std::vector<int> merged;
      for (const OpInput& in : node.inputs) {
        if (in.value < 0) continue;
        for (int p : producers[static_cast<size_t>(in.value)])
          if (std::find(merged.begin(), merged.end(), p) == merged.end()) merged.push_back(p);
      }
      if (!merged.empty())
        for (int out : node.outputs) producers[static_cast<size_t>(out)] = merged;
      return;
    }
    Op& op = graph.ops[current];
    for (const c10::IValue& value : stack) {
      std::vector<at::Tensor> tensors;
      tensors_in(value, tensors);
      for (const at::Tensor& t : tensors) op.outputs.push_back(describe_tensor(t));
    }
    op.work = estimate_work(op.kind, current_arguments, op.outputs);
    // Autograd accumulates each trained parameter's gradient in a node of its own.
    if (op.work->backward_kernels > 0) op.work->backward_kernels += current_trained_tensors;
    for (int out : node.outputs) producers[static_cast<size_t>(out)] = {current};
  };

  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  {
    at::NoGradGuard no_grad;
    // Capture runs the model once: what that changes (buffers, the random generators) is put
    // back, so a captured model trains from the state it was given.
    const detail::ModelState untouched(program.buffers);
    try {
      program.run(args, before, after);
    } catch (...) {
      untouched.restore();
      throw;
    }
    untouched.restore();
  }
  for (const auto& [key, bytes] : edges) graph.edges.push_back({key.first, key.second, bytes});
  if (graph.ops.empty()) throw CaptureError("the model has no tensor operations to place");
  graph.parameters = parameter_table(program);
  graph.validate();
  add_gradient_accumulation(graph);
  return graph;
}

OpGraph capture(const torch::jit::Module& module, const std::vector<at::Tensor>& inputs,
                const std::string& name) {
  return capture(Model::from_torchscript(module), inputs, name);
}

std::vector<at::Tensor> example_inputs(const std::vector<std::vector<int64_t>>& shapes,
                                       const std::string& dtype, bool meta) {
  const c10::ScalarType type = input_dtype(dtype);
  std::vector<at::Tensor> inputs;
  for (const auto& shape : shapes) inputs.push_back(example_input(shape, type, meta));
  return inputs;
}

std::vector<at::Tensor> example_inputs(const Model& model, std::vector<std::vector<int64_t>> shapes,
                                       const std::string& dtype) {
  const OpProgram& program = model.program();
  const bool meta = model.on_meta_device();
  if (model.frontend() == "torchscript") {
    if (shapes.empty())
      throw CaptureError(
          "a TorchScript model records no input shapes: give the shape of each forward() input "
          "(--input)");
    return example_inputs(shapes, dtype.empty() ? "float32" : dtype, meta);
  }
  std::vector<const RecordedTensor*> recorded;
  std::string takes;
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const auto it = program.recorded.find(program.inputs[i]);
    if (it == program.recorded.end())
      throw CaptureError("input " + std::to_string(i) +
                         " of the program is not a tensor; capture takes tensor inputs only");
    recorded.push_back(&it->second);
    takes += (takes.empty() ? "" : ", ") + shape_text(it->second.shape) + " " +
             dtype_name(it->second.dtype);
  }
  if (shapes.empty())
    for (const RecordedTensor* r : recorded) {
      if (std::any_of(r->shape.begin(), r->shape.end(), [](int64_t d) { return d < 0; }))
        throw CaptureError("the program records no example size for an input (" + takes +
                           "): give the shape of each input (--input)");
      shapes.push_back(r->shape);
    }
  if (shapes.size() != recorded.size())
    throw CaptureError("the program takes " + std::to_string(recorded.size()) + " input(s) (" +
                       takes + ", as exported), " + std::to_string(shapes.size()) +
                       " shape(s) given");
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].size() != recorded[i]->shape.size())
      throw CaptureError("input " + std::to_string(i) + ": " + shape_text(shapes[i]) + " has " +
                         std::to_string(shapes[i].size()) + " dimension(s), the program takes " +
                         shape_text(recorded[i]->shape) + " (" + takes + ", as exported)");
    inputs.push_back(
        example_input(shapes[i], dtype.empty() ? recorded[i]->dtype : input_dtype(dtype), meta));
  }
  return inputs;
}

bool on_meta_device(const torch::jit::Module& module) {
  for (const at::Tensor& t : module.parameters())
    if (t.is_meta()) return true;
  for (const at::Tensor& t : module.buffers())
    if (t.is_meta()) return true;
  return false;
}

OpGraph capture_file(const std::string& path, const std::vector<std::vector<int64_t>>& shapes,
                     const std::string& dtype) {
  // A .pt2's weights are not needed for shapes and work: its parameters are captured as meta
  // tensors.
  const bool exported = detail::is_pt2(path);
  const Model model = exported ? Model::load_exported(path, /*weights=*/false) : Model::load(path);
  try {
    std::string name = path.substr(path.find_last_of('/') + 1);
    if (const auto dot = name.rfind('.'); dot != std::string::npos) name.resize(dot);
    return capture(model, example_inputs(model, shapes, dtype), name);
  } catch (const CaptureError& e) {
    throw CaptureError(path + ": " + e.what());
  }
}

}  // namespace placement
