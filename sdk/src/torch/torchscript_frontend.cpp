#include "torchscript_frontend.h"

#include <unordered_map>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include "placement/capture_error.h"

namespace placement::detail {

using torch::jit::Node;
using torch::jit::Value;

namespace {

using Kind = OpNode::Kind;

std::optional<Kind> structural_kind(c10::Symbol kind) {
  if (kind == c10::prim::ListConstruct) return Kind::kListConstruct;
  if (kind == c10::prim::ListUnpack) return Kind::kListUnpack;
  if (kind == c10::prim::TupleConstruct) return Kind::kTupleConstruct;
  if (kind == c10::prim::TupleUnpack) return Kind::kTupleUnpack;
  if (kind == c10::prim::TupleIndex) return Kind::kTupleIndex;
  // A traced Hugging Face model returns {"logits": ...}.
  if (kind == c10::prim::DictConstruct) return Kind::kDictConstruct;
  return std::nullopt;
}

// Whether a value of this type can carry tensors: a tensor, or a list, tuple, dict or optional
// holding them.
bool may_hold_tensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& contained : type->containedTypes())
    if (may_hold_tensors(contained)) return true;
  return false;
}

bool is_tensor_op(const Node* node) {
  if (!node->kind().is_aten()) return false;
  for (const Value* out : node->outputs()) {
    const auto& type = out->type();
    if (type->kind() == c10::TypeKind::TensorType) return true;
    if (auto list = type->cast<c10::ListType>();
        list && list->getElementType()->kind() == c10::TypeKind::TensorType)
      return true;
  }
  return false;
}

// The attribute path of a module value: GetAttr chains lead back to the graph's `self`.
std::string module_path(const Value* value, const Value* self) {
  std::vector<std::string> parts;
  while (value != self) {
    const Node* node = value->node();
    if (node->kind() != c10::prim::GetAttr) return "?";
    parts.push_back(node->s(c10::attr::name));
    value = node->input();
  }
  std::string path;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) path += (path.empty() ? "" : ".") + *it;
  return path;
}

// "encoder.0" for a node inlined from that submodule's forward ("" at the top level): the full
// attribute path, which TorchScript's own inliner does not keep (it records only the last
// attribute name, so encoder.0 and decoder.0 would both read "0").
std::unordered_map<const Node*, std::string> inline_calls(torch::jit::Graph& graph) {
  std::unordered_map<const Node*, std::string> scopes;
  auto scope_of = [&scopes](const Node* n) {
    auto it = scopes.find(n);
    return it == scopes.end() ? std::string() : it->second;
  };
  const Value* self = graph.inputs()[0];
  for (auto it = graph.nodes().begin(); it != graph.nodes().end();) {
    Node* node = *it;
    const auto kind = node->kind();
    torch::jit::Function* callee = nullptr;
    std::string scope;
    if (kind == c10::prim::CallMethod) {
      auto cls = node->input(0)->type()->cast<c10::ClassType>();
      if (cls) callee = cls->findMethod(node->s(c10::attr::name));
      scope = module_path(node->input(0), self);
    } else if (kind == c10::prim::CallFunction) {
      if (auto fn = node->input(0)->type()->cast<c10::FunctionType>()) callee = fn->function();
      scope = scope_of(node);
    }
    if (!callee) {
      ++it;
      continue;
    }
    Node* before = node->prev();
    Node* after = node->next();
    // The callee's own graph, not its optimized (already inlined) one: nested calls must stay
    // calls so that they get their own scope.
    auto& function = torch::jit::toGraphFunction(*callee);
    torch::jit::inlineCallTo(node, &function, function.graph().get());
    // The callee's nodes now sit between `before` and `after`; nested calls among them are
    // inlined when the scan reaches them, with their own (deeper) paths.
    for (Node* n = before->next(); n != after; n = n->next()) scopes[n] = scope;
    it = before->next()->iterator();
  }
  return scopes;
}

}  // namespace

OpProgram from_torchscript(const torch::jit::Module& module) {
  std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  const std::unordered_map<const Node*, std::string> scopes = inline_calls(*graph);
  auto scope_of = [&scopes](const Node* n) {
    auto it = scopes.find(n);
    return it == scopes.end() ? std::string() : it->second;
  };
  auto describe = [&scope_of](const Node* n) {
    const std::string scope = scope_of(n);
    return std::string(n->kind().toQualString()) + (scope.empty() ? "" : " in " + scope);
  };

  OpProgram program;
  program.frontend = "torchscript";
  program.keep_alive = graph;
  std::unordered_map<const Value*, int> slots;
  std::unordered_map<const Value*, c10::IValue> constants;
  std::unordered_map<const Value*, c10::IValue> objects{{graph->inputs()[0], module._ivalue()}};
  auto new_slot = [&program, &slots](const Value* v) {
    const int slot = static_cast<int>(program.num_values++);
    slots[v] = slot;
    return slot;
  };
  auto input_of = [&](const Value* v, const Node* user) {
    if (auto c = constants.find(v); c != constants.end()) return OpInput::of(c->second);
    auto s = slots.find(v);
    if (s == slots.end())
      throw CaptureError("unsupported op " + describe(user) +
                         ": it takes a module object, not a tensor or value");
    const bool nested =
        v->type()->kind() != c10::TypeKind::TensorType && may_hold_tensors(v->type());
    return OpInput::slot(s->second, nested);
  };

  for (size_t i = 1; i < graph->inputs().size(); ++i)
    program.inputs.push_back(new_slot(graph->inputs()[i]));
  for (const Node* node : graph->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::If || kind == c10::prim::Loop)
      throw CaptureError(
          "the model has control flow (" + std::string(kind.toQualString()) + " in '" +
          scope_of(node) + "', " + node->sourceRange().str() +
          ") that cannot be unrolled for placement; export it with torch.export, or trace it with "
          "torch.jit.trace for the input shapes you train with");
    if (kind == c10::prim::CallMethod || kind == c10::prim::CallFunction)
      throw CaptureError("a call could not be inlined (" + describe(node) + ")");
    if (kind == c10::prim::Constant) {
      constants[node->output()] = *torch::jit::toIValue(node->output());
      continue;
    }
    if (kind == c10::prim::GetAttr) {
      auto object = objects.find(node->input());
      if (object == objects.end() || !object->second.isObject())
        throw CaptureError("unsupported attribute read " + describe(node) +
                           ": not of the module or a submodule");
      c10::IValue value = object->second.toObject()->getAttr(node->s(c10::attr::name));
      if (value.isObject()) {
        objects[node->output()] = std::move(value);
      } else if (may_hold_tensors(node->output()->type())) {
        // The module's own tensors (or a list of them: a scripted RNN's _flat_weights).
        program.bound.emplace_back(new_slot(node->output()), std::move(value));
      } else {
        // Anything else (training, a hyperparameter) is read when the step runs, as TorchScript
        // does: module.eval() between steps still counts.
        OpNode read;
        read.name = "prim::GetAttr";
        read.scope = scope_of(node);
        read.call = [object = object->second.toObject(), name = node->s(c10::attr::name)](
                        torch::jit::Stack& stack) { stack.push_back(object->getAttr(name)); };
        read.outputs = {new_slot(node->output())};
        read.outputs_hold_tensors = {false};
        program.nodes.push_back(std::move(read));
      }
      continue;
    }
    OpNode op;
    op.name = kind.toQualString();
    op.scope = scope_of(node);
    if (const auto structural = structural_kind(kind)) {
      op.kind = *structural;
      if (kind == c10::prim::ListConstruct) {
        op.element_type = node->output()->type()->expectRef<c10::ListType>().getElementType();
      } else if (kind == c10::prim::DictConstruct) {
        const auto& type = node->output()->type()->expectRef<c10::DictType>();
        op.element_type = type.getKeyType();
        op.value_type = type.getValueType();
      }
    } else {
      if (!node->maybeOperator())
        throw CaptureError("unsupported op " + describe(node) +
                           ": it has no implementation in this LibTorch");
      const torch::jit::Operator& op_entry = node->getOperator();
      if (op_entry.isC10Op()) {
        const auto& name = op_entry.schema().operator_name();
        op.handle = c10::Dispatcher::singleton().findOp(name);
      }
      // TorchScript's own operators (aten::size, aten::Int, prim::NumToTensor ...) are not the
      // dispatcher's; they run as the interpreter runs them.
      if (!op.handle) op.call = node->getOperation();
      op.tensor_op = is_tensor_op(node);
    }
    for (const Value* in : node->inputs()) op.inputs.push_back(input_of(in, node));
    for (const Value* out : node->outputs()) {
      op.outputs.push_back(new_slot(out));
      op.outputs_hold_tensors.push_back(may_hold_tensors(out->type()));
    }
    program.nodes.push_back(std::move(op));
  }
  for (const Value* out : graph->outputs())
    program.outputs.push_back(input_of(out, graph->return_node()));
  for (const auto& p : module.named_parameters()) {
    program.parameters.push_back(p.value);
    program.parameter_names.push_back(p.name);
  }
  for (const auto& b : module.named_buffers(true)) program.buffers.emplace_back(b.name, b.value);
  program.complete();
  return program;
}

}  // namespace placement::detail
