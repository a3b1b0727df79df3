#include "program.h"

#include <torch/csrc/jit/api/function_impl.h>

#include "placement/capture.h"

namespace placement::detail {

using torch::jit::Node;

namespace {

// Structural instructions the TorchScript interpreter executes itself (they have no registered
// operator): building and taking apart lists and tuples.
bool is_structural(c10::Symbol kind) {
  return kind == c10::prim::ListConstruct || kind == c10::prim::ListUnpack || kind == c10::prim::TupleConstruct ||
         kind == c10::prim::TupleUnpack || kind == c10::prim::TupleIndex;
}

void run_structural(const Node* node, std::vector<c10::IValue>& stack) {
  const auto kind = node->kind();
  if (kind == c10::prim::ListConstruct) {
    c10::impl::GenericList list(node->output()->type()->expectRef<c10::ListType>().getElementType());
    list.reserve(stack.size());
    for (auto& v : stack) list.push_back(std::move(v));
    stack.assign(1, c10::IValue(std::move(list)));
  } else if (kind == c10::prim::TupleConstruct) {
    auto tuple = c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.begin(), stack.end()));
    stack.assign(1, c10::IValue(std::move(tuple)));
  } else if (kind == c10::prim::ListUnpack) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& v : stack.at(0).toListRef()) items.push_back(v);
    stack = std::move(items);
  } else if (kind == c10::prim::TupleUnpack) {
    const auto elements = stack.at(0).toTupleRef().elements();
    stack.assign(elements.begin(), elements.end());
  } else {  // prim::TupleIndex(tuple, index)
    const auto elements = stack.at(0).toTupleRef().elements();
    int64_t index = stack.at(1).toInt();
    if (index < 0) index += static_cast<int64_t>(elements.size());
    stack.assign(1, elements.at(static_cast<size_t>(index)));
  }
}

}  // namespace

// The attribute path of a module value: GetAttr chains lead back to the graph's `self`.
std::string module_path(const torch::jit::Value* value, const torch::jit::Value* self) {
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

std::string Program::describe(const Node* node) const {
  const std::string scope = scope_of(node);
  return std::string(node->kind().toQualString()) + (scope.empty() ? "" : " in " + scope);
}

void Program::inline_calls() {
  const torch::jit::Value* self = graph_->inputs()[0];
  for (auto it = graph_->nodes().begin(); it != graph_->nodes().end();) {
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
    for (Node* n = before->next(); n != after; n = n->next()) scopes_[n] = scope;
    it = before->next()->iterator();
  }
}

Program::Program(const torch::jit::Module& module) : module_(module) {
  graph_ = module_.get_method("forward").graph()->copy();
  inline_calls();
  for (const Node* node : graph_->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::If || kind == c10::prim::Loop)
      throw CaptureError("the model has control flow (" + std::string(kind.toQualString()) + " in '" +
                         scope_of(node) + "', " + node->sourceRange().str() +
                         ") that cannot be unrolled for placement; trace it with torch.jit.trace for the "
                         "input shapes you train with");
    if (kind == c10::prim::CallMethod || kind == c10::prim::CallFunction)
      throw CaptureError("a call could not be inlined (" + describe(node) + ")");
    if (kind != c10::prim::Constant && kind != c10::prim::GetAttr && !is_structural(kind) && !node->maybeOperator())
      throw CaptureError("unsupported op " + describe(node) + ": it has no implementation in this LibTorch");
  }
}

std::string Program::scope_of(const Node* node) const {
  auto it = scopes_.find(node);
  return it == scopes_.end() ? std::string() : it->second;
}

bool Program::is_tensor_op(const Node* node) {
  const auto kind = node->kind();
  if (kind == c10::prim::Constant || kind == c10::prim::GetAttr) return false;
  if (!kind.is_aten()) return false;
  for (const torch::jit::Value* out : node->outputs()) {
    const auto& type = out->type();
    if (type->kind() == c10::TypeKind::TensorType) return true;
    if (auto list = type->cast<c10::ListType>(); list && list->getElementType()->kind() == c10::TypeKind::TensorType) return true;
  }
  return false;
}

std::vector<c10::IValue> Program::run(const std::vector<c10::IValue>& inputs, const Hook& before,
                                      const Hook& after) const {
  if (inputs.size() != num_inputs())
    throw CaptureError("the model's forward takes " + std::to_string(num_inputs()) + " input(s), " +
                       std::to_string(inputs.size()) + " given");
  std::unordered_map<const torch::jit::Value*, c10::IValue> env;
  env[graph_->inputs()[0]] = module_._ivalue();
  for (size_t i = 0; i < inputs.size(); ++i) env[graph_->inputs()[i + 1]] = inputs[i];
  std::vector<c10::IValue> stack;
  for (const Node* node : graph_->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::Constant) {
      env[node->output()] = *torch::jit::toIValue(node->output());
      continue;
    }
    if (kind == c10::prim::GetAttr) {
      env[node->output()] = env.at(node->input()).toObject()->getAttr(node->s(c10::attr::name));
      continue;
    }
    stack.clear();
    for (const torch::jit::Value* in : node->inputs()) stack.push_back(env.at(in));
    if (before) before(node, stack);
    try {
      if (is_structural(kind)) run_structural(node, stack);
      else node->getOperation()(stack);
    } catch (const std::exception& e) {
      std::string message = e.what();
      if (const auto cut = message.find("\nException raised from"); cut != std::string::npos) message.resize(cut);
      throw CaptureError(describe(node) + " failed on the example inputs: " + message +
                         " (do the input shapes match what the model was traced with?)");
    }
    if (stack.size() != node->outputs().size())
      throw CaptureError(describe(node) + " returned " + std::to_string(stack.size()) + " values, expected " +
                         std::to_string(node->outputs().size()));
    if (after) after(node, stack);
    for (size_t i = 0; i < stack.size(); ++i) env[node->outputs()[i]] = std::move(stack[i]);
  }
  std::vector<c10::IValue> outputs;
  for (const torch::jit::Value* out : graph_->outputs()) outputs.push_back(env.at(out));
  return outputs;
}

}  // namespace placement::detail
