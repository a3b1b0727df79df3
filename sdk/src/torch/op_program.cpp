#include "op_program.h"

#include <algorithm>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include "placement/capture_error.h"
#include "tensor_bytes.h"

namespace placement::detail {

namespace {

using Kind = OpNode::Kind;

void run_structural(const OpNode& node, std::vector<c10::IValue>& stack) {
  switch (node.kind) {
    case Kind::kListConstruct: {
      c10::impl::GenericList list(node.element_type);
      list.reserve(stack.size());
      for (auto& v : stack) list.push_back(std::move(v));
      stack.assign(1, c10::IValue(std::move(list)));
      return;
    }
    case Kind::kDictConstruct: {  // key, value, key, value, ...
      c10::impl::GenericDict dict(node.element_type, node.value_type);
      for (size_t i = 0; i + 1 < stack.size(); i += 2)
        dict.insert_or_assign(stack[i], stack[i + 1]);
      stack.assign(1, c10::IValue(std::move(dict)));
      return;
    }
    case Kind::kTupleConstruct: {
      auto tuple = c10::ivalue::Tuple::create(std::vector<c10::IValue>(stack.begin(), stack.end()));
      stack.assign(1, c10::IValue(std::move(tuple)));
      return;
    }
    case Kind::kListUnpack: {
      std::vector<c10::IValue> items;
      for (const c10::IValue& v : stack.at(0).toListRef()) items.push_back(v);
      stack = std::move(items);
      return;
    }
    case Kind::kTupleUnpack: {
      const auto elements = stack.at(0).toTupleRef().elements();
      stack.assign(elements.begin(), elements.end());
      return;
    }
    case Kind::kTupleIndex: {
      const auto elements = stack.at(0).toTupleRef().elements();
      int64_t index = stack.at(1).toInt();
      if (index < 0) index += static_cast<int64_t>(elements.size());
      stack.assign(1, elements.at(static_cast<size_t>(index)));
      return;
    }
    case Kind::kOperator:
      break;
  }
}

void append_unique(std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from) {
  for (const at::Tensor& t : from) {
    const bool seen =
        std::any_of(to.begin(), to.end(), [&t](const at::Tensor& u) { return u.is_same(t); });
    if (!seen) to.push_back(t);
  }
}

bool holds_meta(const std::vector<c10::IValue>& stack) {
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : stack) tensors_in(v, tensors);
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const at::Tensor& t) { return t.defined() && t.is_meta(); });
}

// Runs an op that LibTorch has no meta kernel for (many of PyTorch's meta implementations are
// registered from Python, which a C++ process never loads) on CPU zeros of its inputs' shapes, and
// returns meta tensors of its outputs' shapes. Zeros are valid token ids and indices; the op's
// values are thrown away, only shapes are kept. Costs the op's CPU time and its inputs' memory, for
// these few ops only.
void run_on_cpu_zeros(const OpNode& node, std::vector<c10::IValue>& stack) {
  for (c10::IValue& v : stack)
    v = map_tensors(v, [](const at::Tensor& t) {
      return t.is_meta()
                 ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU)).zero_()
                 : t;
    });
  call(node, stack);
  for (c10::IValue& v : stack)
    v = map_tensors(v, [](const at::Tensor& t) {
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
    });
}

// Attention has no meta kernel in a C++ process, and on CPU zeros it would compute every score
// (minutes for GPT-2 XL at 1024 tokens). Its output is the query's shape with the value's last
// dimension, in the query's dtype: all that a pass on meta tensors keeps.
bool run_attention_on_meta(const OpNode& node, std::vector<c10::IValue>& stack) {
  if (node.name != "aten::scaled_dot_product_attention" || stack.size() < 3 ||
      !stack[0].isTensor() || !stack[2].isTensor())
    return false;
  const at::Tensor& query = stack[0].toTensor();
  const at::Tensor& value = stack[2].toTensor();
  if (!query.is_meta() || query.dim() < 2 || value.dim() < 1) return false;
  std::vector<int64_t> sizes(query.sizes().begin(), query.sizes().end());
  sizes.back() = value.size(-1);
  stack.assign(1, at::empty(sizes, query.options()));
  return true;
}

// An op without a meta kernel, at the example the program records: its outputs are meta tensors of
// the recorded shapes, strides and dtypes, so that nothing runs (an embedding's CPU zeros would
// hold its whole table). False when an output is not recorded in full.
bool run_as_recorded(const OpProgram& program, const OpNode& node,
                     std::vector<c10::IValue>& stack) {
  // An op that returns nothing (an assertion) is run for what it checks.
  if (node.outputs.empty() || !records_outputs_faithfully(node.name)) return false;
  std::vector<c10::IValue> outputs;
  for (int slot : node.outputs) {
    const auto it = program.recorded.find(slot);
    if (it == program.recorded.end() || !it->second.known()) return false;
    const RecordedTensor& r = it->second;
    outputs.emplace_back(at::empty_strided(r.shape, r.strides,
                                           at::TensorOptions().dtype(r.dtype).device(at::kMeta)));
  }
  stack = std::move(outputs);
  return true;
}

std::string first_line(std::string message) {
  if (const auto cut = message.find("\nException raised from"); cut != std::string::npos)
    message.resize(cut);
  return message;
}

}  // namespace

void call(const OpNode& node, std::vector<c10::IValue>& stack) {
  if (node.kind != Kind::kOperator)
    run_structural(node, stack);
  else if (node.handle)
    node.handle->callBoxed(stack);
  else
    node.call(stack);
}

bool records_outputs_faithfully(const std::string& op) {
  // Traced through their Python decompositions, which stack each layer's [1, batch, hidden] final
  // state. ExportedModel.RecordsAreWhatTheOpsComputeSaveForTheFusedRecurrentOps runs every test
  // model against its record and finds LSTM's.
  return op != "aten::lstm" && op != "aten::gru" && op != "aten::rnn_tanh" &&
         op != "aten::rnn_relu";
}

bool RecordedTensor::known() const {
  return shape.size() == strides.size() &&
         std::none_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }) &&
         std::none_of(strides.begin(), strides.end(), [](int64_t d) { return d < 0; });
}

bool OpProgram::records(const std::vector<c10::IValue>& given) const {
  if (recorded.empty() || given.size() != inputs.size()) return false;
  for (size_t i = 0; i < given.size(); ++i) {
    const auto it = recorded.find(inputs[i]);
    if (it == recorded.end() || !given[i].isTensor()) return false;
    const at::Tensor& t = given[i].toTensor();
    if (!t.defined() || t.scalar_type() != it->second.dtype ||
        !std::equal(it->second.shape.begin(), it->second.shape.end(), t.sizes().begin(),
                    t.sizes().end()))
      return false;
  }
  return true;
}

std::optional<c10::OperatorHandle> find_operator(const std::string& name,
                                                 const std::string& overload) {
  return c10::Dispatcher::singleton().findOp(c10::OperatorName(name, overload));
}

std::string OpProgram::describe(const OpNode& node) const {
  std::string text = node.name + (node.scope.empty() ? "" : " in " + node.scope);
  if (!node.source.empty()) text += " (" + node.source + ")";
  return text;
}

void OpProgram::validate() const {
  auto check_slot = [this](int slot, const std::string& what) {
    if (slot < 0 || static_cast<size_t>(slot) >= num_values)
      throw CaptureError(origin + ": " + what + " refers to value " + std::to_string(slot) +
                         ", outside the program");
  };
  for (int slot : inputs) check_slot(slot, "an input");
  for (const auto& [slot, value] : bound) check_slot(slot, "a module tensor");
  for (const OpInput& out : outputs)
    if (out.value >= 0) check_slot(out.value, "an output");
  for (const OpNode& node : nodes) {
    for (const OpInput& in : node.inputs)
      if (in.value >= 0) check_slot(in.value, describe(node));
    for (int out : node.outputs) check_slot(out, describe(node));
    if (node.outputs_hold_tensors.size() != node.outputs.size())
      throw CaptureError(origin + ": " + describe(node) + " has no tensor flags for its outputs");
    if (node.kind == Kind::kOperator && !node.handle && !node.call)
      throw CaptureError(origin + ": unsupported op " + describe(node) +
                         ": it has no implementation in this LibTorch");
  }
}

void OpProgram::complete() {
  validate();
  find_module_state();
  // Each slot goes after the last node that reads it; one nothing reads, after the node that made
  // it; the outputs and the module's own slots stay.
  constexpr size_t kNever = static_cast<size_t>(-1), kKept = static_cast<size_t>(-2);
  std::vector<size_t> last_read(num_values, kNever);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const OpInput& in : nodes[i].inputs)
      if (in.value >= 0) last_read[static_cast<size_t>(in.value)] = i;
    for (int out : nodes[i].outputs) last_read[static_cast<size_t>(out)] = i;
  }
  for (const OpInput& out : outputs)
    if (out.value >= 0) last_read[static_cast<size_t>(out.value)] = kKept;
  for (const auto& [slot, value] : bound) last_read[static_cast<size_t>(slot)] = kKept;
  released_after_.assign(nodes.size(), {});
  for (size_t slot = 0; slot < num_values; ++slot)
    if (last_read[slot] != kNever && last_read[slot] != kKept)
      released_after_[last_read[slot]].push_back(static_cast<int>(slot));
  last_read_.assign(num_values, kKeptToTheEnd);
  for (size_t slot = 0; slot < num_values; ++slot)
    if (last_read[slot] != kNever && last_read[slot] != kKept) last_read_[slot] = last_read[slot];
}

size_t OpProgram::last_read(int slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < last_read_.size()
             ? last_read_[static_cast<size_t>(slot)]
             : kKeptToTheEnd;
}

// Follows the module's tensors from the slots that hold them, through list and tuple plumbing, to
// the tensor ops that consume them. Statically, so that the engine places them before any forward
// pass: a parameter not found here would stay where it was loaded and be copied to its consumer
// on every step.
void OpProgram::find_module_state() {
  state_read_.assign(nodes.size(), {});
  std::vector<std::vector<at::Tensor>> state(num_values);
  for (const auto& [slot, value] : bound) tensors_in(value, state[static_cast<size_t>(slot)]);
  std::vector<const OpNode*> producer(num_values, nullptr);
  for (size_t index = 0; index < nodes.size(); ++index) {
    const OpNode& node = nodes[index];
    std::vector<at::Tensor> read;
    for (const OpInput& in : node.inputs)
      if (in.value >= 0) append_unique(read, state[static_cast<size_t>(in.value)]);
    for (int out : node.outputs) producer[static_cast<size_t>(out)] = &node;
    if (read.empty()) continue;
    if (node.tensor_op) {
      state_read_[index] = std::move(read);
      continue;
    }
    // Taking apart a list or tuple built in the program: each output is the element it was built
    // from.
    const OpNode* built = node.inputs.empty() || node.inputs[0].value < 0
                              ? nullptr
                              : producer[static_cast<size_t>(node.inputs[0].value)];
    const bool unpacks_what_was_built =
        built &&
        ((node.kind == Kind::kListUnpack && built->kind == Kind::kListConstruct) ||
         (node.kind == Kind::kTupleUnpack && built->kind == Kind::kTupleConstruct)) &&
        built->inputs.size() == node.outputs.size();
    if (unpacks_what_was_built) {
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (built->inputs[i].value >= 0)
          state[static_cast<size_t>(node.outputs[i])] =
              state[static_cast<size_t>(built->inputs[i].value)];
      continue;
    }
    // Anything else that passes tensors on (list and tuple construction, indexing) may pass on any
    // of its inputs' module tensors.
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs_hold_tensors[i]) state[static_cast<size_t>(node.outputs[i])] = read;
  }
}

const std::vector<at::Tensor>& OpProgram::module_state_read_by(size_t index) const {
  static const std::vector<at::Tensor> none;
  return index < state_read_.size() ? state_read_[index] : none;
}

std::vector<c10::IValue> OpProgram::run(const std::vector<c10::IValue>& given, const Hook& before,
                                        const Hook& after) const {
  if (given.size() != inputs.size())
    throw CaptureError("the model's forward takes " + std::to_string(inputs.size()) +
                       " input(s), " + std::to_string(given.size()) + " given");
  // A region under torch.no_grad() that an op leaves by throwing must not leave autograd off.
  const at::AutoGradMode grad_mode(at::GradMode::is_enabled());
  std::vector<c10::IValue> env(num_values);
  for (const auto& [slot, value] : bound) env[static_cast<size_t>(slot)] = value;
  for (size_t i = 0; i < given.size(); ++i) env[static_cast<size_t>(inputs[i])] = given[i];
  std::vector<c10::IValue> stack, saved;
  const bool meta = holds_meta(given);
  const bool as_recorded = meta && records(given);
  for (size_t index = 0; index < nodes.size(); ++index) {
    const OpNode& node = nodes[index];
    stack.clear();
    for (const OpInput& in : node.inputs)
      stack.push_back(in.value >= 0 ? env[static_cast<size_t>(in.value)] : in.constant);
    if (before) before(node, stack);
    if (meta) saved = stack;
    // On meta tensors, an op that failed runs another way. Only a missing meta kernel may take the
    // record: an op that refuses its arguments must fail here as it would in training, which its
    // run on CPU zeros shows.
    auto run_otherwise = [&](bool missing_kernel) {
      if (!meta || !holds_meta(saved)) return false;
      stack = saved;
      if (!(missing_kernel && as_recorded && run_as_recorded(*this, node, stack)) &&
          !run_attention_on_meta(node, stack))
        run_on_cpu_zeros(node, stack);
      return true;
    };
    try {
      try {
        call(node, stack);
      } catch (const c10::NotImplementedError&) {
        if (!run_otherwise(true)) throw;
      } catch (const c10::Error&) {
        if (!run_otherwise(false)) throw;
      }
    } catch (const CaptureError&) {
      throw;
    } catch (const c10::OutOfMemoryError&) {
      throw;  // the device's, not the op's: a job retries it on another placement
    } catch (const std::exception& e) {
      throw CaptureError(describe(node) + " failed on the example inputs: " + first_line(e.what()) +
                         " (do the input shapes match what the model was captured with?)");
    }
    if (stack.size() != node.outputs.size())
      throw CaptureError(describe(node) + " returned " + std::to_string(stack.size()) +
                         " values, expected " + std::to_string(node.outputs.size()));
    if (after) after(node, stack);
    for (size_t i = 0; i < stack.size(); ++i)
      env[static_cast<size_t>(node.outputs[i])] = std::move(stack[i]);
    if (index < released_after_.size())
      for (int slot : released_after_[index]) env[static_cast<size_t>(slot)] = c10::IValue();
  }
  std::vector<c10::IValue> results;
  for (const OpInput& out : outputs)
    results.push_back(out.value >= 0 ? env[static_cast<size_t>(out.value)] : out.constant);
  if (!buffer_updates.empty()) {
    at::NoGradGuard no_grad;
    for (const auto& [position, buffer] : buffer_updates)
      buffer.copy_(results.at(position).toTensor());
    std::vector<c10::IValue> user;
    for (size_t i = 0; i < results.size(); ++i) {
      const bool update = std::any_of(buffer_updates.begin(), buffer_updates.end(),
                                      [i](const auto& u) { return u.first == i; });
      if (!update) user.push_back(std::move(results[i]));
    }
    results = std::move(user);
  }
  return results;
}

}  // namespace placement::detail
