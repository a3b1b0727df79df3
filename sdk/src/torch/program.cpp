#include "program.h"

#include <algorithm>
#include <functional>

#include <ATen/ops/empty_strided.h>

#include <torch/csrc/jit/api/function_impl.h>

#include "placement/capture.h"
#include "tensor_bytes.h"

namespace placement::detail {

using torch::jit::Node;

namespace {

// Structural instructions the TorchScript interpreter executes itself (they have no registered
// operator): building and taking apart lists and tuples, and building dicts (a traced Hugging Face
// model returns {"logits": ...}).
bool is_structural(c10::Symbol kind) {
  return kind == c10::prim::ListConstruct || kind == c10::prim::ListUnpack || kind == c10::prim::TupleConstruct ||
         kind == c10::prim::TupleUnpack || kind == c10::prim::TupleIndex || kind == c10::prim::DictConstruct;
}

void run_structural(const Node* node, std::vector<c10::IValue>& stack) {
  const auto kind = node->kind();
  if (kind == c10::prim::ListConstruct) {
    c10::impl::GenericList list(node->output()->type()->expectRef<c10::ListType>().getElementType());
    list.reserve(stack.size());
    for (auto& v : stack) list.push_back(std::move(v));
    stack.assign(1, c10::IValue(std::move(list)));
  } else if (kind == c10::prim::DictConstruct) {  // key, value, key, value, ...
    const auto& type = node->output()->type()->expectRef<c10::DictType>();
    c10::impl::GenericDict dict(type.getKeyType(), type.getValueType());
    for (size_t i = 0; i + 1 < stack.size(); i += 2) dict.insert_or_assign(stack[i], stack[i + 1]);
    stack.assign(1, c10::IValue(std::move(dict)));
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

void append_unique(std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
  for (const at::Tensor& t : from) {
    const bool seen = std::any_of(to.begin(), to.end(), [&t](const at::Tensor& u) { return u.is_same(t); });
    if (!seen) to.push_back(t);
  }
}

bool holds_meta(const std::vector<c10::IValue>& stack) {
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : stack) tensors_in(v, tensors);
  return std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) { return t.defined() && t.is_meta(); });
}

// Runs an op that LibTorch has no meta kernel for (many of PyTorch's meta implementations are
// registered from Python, which a C++ process never loads) on CPU zeros of its inputs' shapes, and
// returns meta tensors of its outputs' shapes. Zeros are valid token ids and indices; the op's
// values are thrown away, only shapes are kept. Costs the op's CPU time and its inputs' memory, for
// these few ops only.
void run_on_cpu_zeros(const Node* node, std::vector<c10::IValue>& stack) {
  for (c10::IValue& v : stack)
    v = map_tensors(v, [](const at::Tensor& t) {
      return t.is_meta() ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU)).zero_() : t;
    });
  node->getOperation()(stack);
  for (c10::IValue& v : stack)
    v = map_tensors(v, [](const at::Tensor& t) {
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
    });
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

// Follows the module's tensors from the attribute reads that yield them, through list and tuple
// plumbing, to the tensor ops that consume them. Statically, from the graph alone, so that the
// engine places them before any forward pass: a parameter not found here would stay where it was
// loaded and be copied to its consumer on every step.
void Program::find_module_state() {
  std::unordered_map<const torch::jit::Value*, c10::IValue> objects{{graph_->inputs()[0], module_._ivalue()}};
  std::unordered_map<const torch::jit::Value*, std::vector<at::Tensor>> state;
  auto state_of = [&state](const torch::jit::Value* v) -> const std::vector<at::Tensor>* {
    auto it = state.find(v);
    return it == state.end() ? nullptr : &it->second;
  };
  for (const Node* node : graph_->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::GetAttr) {
      auto object = objects.find(node->input());
      if (object == objects.end() || !object->second.isObject()) continue;
      c10::IValue value = object->second.toObject()->getAttr(node->s(c10::attr::name));
      if (value.isObject()) {
        objects[node->output()] = std::move(value);
      } else {
        std::vector<at::Tensor> tensors;
        tensors_in(value, tensors);  // a tensor, or a list or tuple attribute of them (a scripted RNN's _flat_weights)
        if (!tensors.empty()) state[node->output()] = std::move(tensors);
      }
      continue;
    }
    std::vector<at::Tensor> read;
    for (const torch::jit::Value* in : node->inputs())
      if (const auto* s = state_of(in)) append_unique(read, *s);
    if (read.empty()) continue;
    if (is_tensor_op(node)) {
      state_read_[node] = std::move(read);
      continue;
    }
    // Taking apart a list or tuple built in the graph: each output is the element it was built from.
    const Node* built = node->inputs().empty() ? nullptr : node->input(0)->node();
    const bool unpacks_what_was_built =
        built && ((kind == c10::prim::ListUnpack && built->kind() == c10::prim::ListConstruct) ||
                  (kind == c10::prim::TupleUnpack && built->kind() == c10::prim::TupleConstruct)) &&
        built->inputs().size() == node->outputs().size();
    if (unpacks_what_was_built) {
      for (size_t i = 0; i < node->outputs().size(); ++i)
        if (const auto* s = state_of(built->input(i))) state[node->output(i)] = *s;
      continue;
    }
    // Anything else that passes tensors on (list and tuple construction, indexing) may pass on any
    // of its inputs' module tensors.
    for (const torch::jit::Value* out : node->outputs())
      if (may_hold_tensors(out->type())) state[out] = read;
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
  find_module_state();
}

bool Program::may_hold_tensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& contained : type->containedTypes())
    if (may_hold_tensors(contained)) return true;
  return false;
}

const std::vector<at::Tensor>& Program::module_state_read_by(const Node* node) const {
  static const std::vector<at::Tensor> none;
  auto it = state_read_.find(node);
  return it == state_read_.end() ? none : it->second;
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
  std::vector<c10::IValue> stack, saved;
  const bool meta = holds_meta(inputs);
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
    if (meta) saved = stack;
    try {
      if (is_structural(kind)) {
        run_structural(node, stack);
      } else {
        try {
          node->getOperation()(stack);
        } catch (const c10::Error&) {
          if (!meta || !holds_meta(saved)) throw;
          stack = saved;
          run_on_cpu_zeros(node, stack);
        }
      }
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
