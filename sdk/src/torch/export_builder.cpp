// from_export: an ExportedProgram's graph into an OpProgram. Each node's target is looked up in the
// dispatcher, its named arguments are put in schema order, parameters and buffers come by their
// names from the graph signature, nn_module_stack gives the scope and stack_trace the source line
// errors quote.

#include <ATen/ScalarOps.h>
#include <ATen/core/grad_mode.h>
#include <torch/version.h>

#include "export_frontend.h"
#include "export_schema.h"
#include "placement/capture_error.h"

namespace placement::detail {

namespace ex = torch::_export;

namespace {

using Kind = OpNode::Kind;

// `nn_module_stack` is "key,path,type;key,path,type..." with commas inside brackets kept (a path
// may read "layers.slice(None, 2, None).0"); the innermost module's path is the op's scope.
std::string scope_from(const std::string& stack) {
  if (stack.empty()) return "";
  const size_t last = stack.rfind(';');
  const std::string item = last == std::string::npos ? stack : stack.substr(last + 1);
  std::vector<std::string> parts;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i < item.size(); ++i) {
    const char c = item[i];
    if (c == '(' || c == '[')
      ++depth;
    else if (c == ')' || c == ']')
      --depth;
    else if (c == ',' && depth == 0) {
      parts.push_back(item.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(item.substr(start));
  return parts.size() == 3 ? parts[1] : "";
}

// The outermost frame of the node's stack trace: the user's own line in their forward().
std::string source_from(const std::string& trace) {
  if (trace.empty()) return "";
  const size_t end = trace.find('\n');
  std::string line = trace.substr(0, end);
  while (!line.empty() && line.front() == ' ') line.erase(line.begin());
  return line;
}

bool is_tensor_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto list = type->cast<c10::ListType>()) return is_tensor_type(list->getElementType());
  if (auto optional = type->cast<c10::OptionalType>())
    return is_tensor_type(optional->getElementType());
  return false;
}

class Builder {
 public:
  explicit Builder(OpProgram& program) : program_(program) {}

  int define(const std::string& name) {
    const int slot = fresh();
    slots_[name] = slot;
    if (values_ != nullptr)
      if (auto it = values_->find(name); it != values_->end()) record(slot, it->second);
    return slot;
  }
  // The graph whose tensor_values describe the names defined from now on: an inlined subgraph
  // (a grad-mode region) records its own values, under names of its own.
  void describe_with(const ex::Graph& graph) { values_ = &graph.get_tensor_values(); }
  int fresh() { return static_cast<int>(program_.num_values++); }
  void constant(const std::string& name, c10::IValue value) { constants_[name] = std::move(value); }

  OpInput ref(const std::string& name, const std::string& where) const {
    if (auto c = constants_.find(name); c != constants_.end()) return OpInput::of(c->second);
    auto it = slots_.find(name);
    if (it == slots_.end())
      throw CaptureError(where + " reads '" + name + "', which nothing before it produces");
    return OpInput::slot(it->second);
  }

  // A list built at run time from values of the program: a ListConstruct node ahead of its user.
  OpInput list(std::vector<OpInput> items, c10::TypePtr element, bool tensors, const OpNode& user) {
    const bool all_constant =
        std::all_of(items.begin(), items.end(), [](const OpInput& i) { return i.value < 0; });
    if (all_constant && !tensors) {
      c10::impl::GenericList list(element);
      for (auto& i : items) list.push_back(i.constant);
      return OpInput::of(std::move(list));
    }
    OpNode node;
    node.kind = Kind::kListConstruct;
    node.name = "prim::ListConstruct";
    node.scope = user.scope;
    node.source = user.source;
    node.element_type = std::move(element);
    node.inputs = std::move(items);
    const int slot = fresh();
    node.outputs = {slot};
    node.outputs_hold_tensors = {tensors};
    program_.nodes.push_back(std::move(node));
    return OpInput::slot(slot, tensors);
  }

  OpInput sym_int(const ex::SymIntArgument& a, const std::string& where) const {
    return a.tag() == ex::SymIntArgument::Tag::AS_INT ? OpInput::of(a.get_as_int())
                                                      : ref(a.get_as_name(), where);
  }
  OpInput sym_bool(const ex::SymBoolArgument& a, const std::string& where) const {
    return a.tag() == ex::SymBoolArgument::Tag::AS_BOOL ? OpInput::of(a.get_as_bool())
                                                        : ref(a.get_as_name(), where);
  }
  OpInput sym_float(const ex::SymFloatArgument& a, const std::string& where) const {
    return a.tag() == ex::SymFloatArgument::Tag::AS_FLOAT ? OpInput::of(a.get_as_float().get())
                                                          : ref(a.get_as_name(), where);
  }
  OpInput optional_tensor(const ex::OptionalTensorArgument& a, const std::string& where) const {
    return a.tag() == ex::OptionalTensorArgument::Tag::AS_NONE
               ? OpInput::of(c10::IValue())
               : ref(a.get_as_tensor().get_name(), where);
  }

  // `expected`: the schema's type for it, where known (a Tensor?[] may be recorded as a Tensor[]).
  OpInput argument(const ex::Argument& a, const OpNode& user, const std::string& where,
                   const c10::TypePtr& expected = nullptr) {
    using Tag = ex::Argument::Tag;
    switch (a.tag()) {
      case Tag::AS_NONE:
        return OpInput::of(c10::IValue());
      case Tag::AS_TENSOR:
        return ref(a.get_as_tensor().get_name(), where);
      case Tag::AS_OPTIONAL_TENSOR:
        return optional_tensor(a.get_as_optional_tensor(), where);
      case Tag::AS_TENSORS: {
        std::vector<OpInput> items;
        for (const auto& t : a.get_as_tensors()) items.push_back(ref(t.get_name(), where));
        c10::TypePtr element = c10::TensorType::get();
        if (auto l = expected ? expected->cast<c10::ListType>() : nullptr)
          element = l->getElementType();
        return list(std::move(items), element, true, user);
      }
      case Tag::AS_OPTIONAL_TENSORS: {
        std::vector<OpInput> items;
        for (const auto& t : a.get_as_optional_tensors())
          items.push_back(optional_tensor(t, where));
        return list(std::move(items), c10::OptionalType::create(c10::TensorType::get()), true,
                    user);
      }
      case Tag::AS_INT:
        return OpInput::of(a.get_as_int());
      case Tag::AS_INTS:
        return OpInput::of(a.get_as_ints());
      case Tag::AS_FLOAT:
        return OpInput::of(a.get_as_float().get());
      case Tag::AS_FLOATS: {
        std::vector<double> v;
        for (const auto& f : a.get_as_floats()) v.push_back(f.get());
        return OpInput::of(v);
      }
      case Tag::AS_STRING:
        return OpInput::of(a.get_as_string());
      case Tag::AS_STRINGS:
        return OpInput::of(c10::List<std::string>(a.get_as_strings()));
      case Tag::AS_BOOL:
        return OpInput::of(a.get_as_bool());
      case Tag::AS_BOOLS: {
        c10::List<bool> v;
        for (bool b : a.get_as_bools()) v.push_back(b);
        return OpInput::of(v);
      }
      case Tag::AS_SYM_INT:
        return sym_int(a.get_as_sym_int(), where);
      case Tag::AS_SYM_BOOL:
        return sym_bool(a.get_as_sym_bool(), where);
      case Tag::AS_SYM_FLOAT:
        return sym_float(a.get_as_sym_float(), where);
      case Tag::AS_SYM_INTS: {
        std::vector<OpInput> items;
        for (const auto& s : a.get_as_sym_ints()) items.push_back(sym_int(s, where));
        return list(std::move(items), c10::IntType::get(), false, user);
      }
      case Tag::AS_SYM_BOOLS: {
        std::vector<OpInput> items;
        for (const auto& s : a.get_as_sym_bools()) items.push_back(sym_bool(s, where));
        return list(std::move(items), c10::BoolType::get(), false, user);
      }
      case Tag::AS_SYM_FLOATS: {
        std::vector<OpInput> items;
        for (const auto& s : a.get_as_sym_floats()) items.push_back(sym_float(s, where));
        return list(std::move(items), c10::FloatType::get(), false, user);
      }
      case Tag::AS_SCALAR_TYPE:
        return OpInput::of(
            static_cast<int64_t>(export_schema::scalar_type(a.get_as_scalar_type())));
      case Tag::AS_LAYOUT:
        return OpInput::of(static_cast<int64_t>(export_schema::layout(a.get_as_layout())));
      case Tag::AS_MEMORY_FORMAT:
        return OpInput::of(
            static_cast<int64_t>(export_schema::memory_format(a.get_as_memory_format())));
      case Tag::AS_DEVICE: {
        const auto& d = a.get_as_device();
        std::string text = d.get_type();
        if (d.get_index()) text += ":" + std::to_string(*d.get_index());
        try {
          return OpInput::of(c10::Device(text));
        } catch (const c10::Error&) {
          throw CaptureError(where + " names a device this LibTorch does not know: '" + text + "'");
        }
      }
      case Tag::AS_GRAPH:
        throw CaptureError(
            where +
            " takes a subgraph (torch.cond, torch.while_loop, a higher-order op): control flow "
            "cannot be placed op by op; rewrite it without data-dependent control flow");
      default:
        break;
    }
    throw CaptureError(where + " takes an argument of a kind placementd cannot run (tag " +
                       std::to_string(static_cast<int>(a.tag())) +
                       ": custom objects, operators, complex constants "
                       "or nested tensor lists)");
  }

  // The name a node output defines, if any (as_none and constants define nothing).
  std::optional<std::string> output_name(const ex::Argument& a) const {
    using Tag = ex::Argument::Tag;
    switch (a.tag()) {
      case Tag::AS_TENSOR:
        return a.get_as_tensor().get_name();
      case Tag::AS_SYM_INT:
        if (a.get_as_sym_int().tag() == ex::SymIntArgument::Tag::AS_NAME)
          return a.get_as_sym_int().get_as_name();
        return std::nullopt;
      case Tag::AS_SYM_BOOL:
        if (a.get_as_sym_bool().tag() == ex::SymBoolArgument::Tag::AS_NAME)
          return a.get_as_sym_bool().get_as_name();
        return std::nullopt;
      case Tag::AS_SYM_FLOAT:
        if (a.get_as_sym_float().tag() == ex::SymFloatArgument::Tag::AS_NAME)
          return a.get_as_sym_float().get_as_name();
        return std::nullopt;
      case Tag::AS_OPTIONAL_TENSOR:
        if (a.get_as_optional_tensor().tag() == ex::OptionalTensorArgument::Tag::AS_TENSOR)
          return a.get_as_optional_tensor().get_as_tensor().get_name();
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  void add_node(const ex::Node& n) {
    const std::string& target = n.get_target();
    const auto& meta = n.get_metadata();
    OpNode op;
    if (auto it = meta.find("nn_module_stack"); it != meta.end()) op.scope = scope_from(it->second);
    if (auto it = meta.find("stack_trace"); it != meta.end()) op.source = source_from(it->second);
    const std::string label = n.get_name() ? *n.get_name() : target;
    const std::string where = program_.origin + ": node '" + label + "' (" + target + ")" +
                              (op.source.empty() ? "" : " at " + op.source);

    if (target == "torch.ops.higher_order.wrap_with_set_grad_enabled") {
      inline_grad_mode_region(n, op, where);
      return;
    }
    if (target.rfind("torch.ops.higher_order.", 0) == 0)
      throw CaptureError(where + ": " + target.substr(23) +
                         " is a higher-order op (torch.cond, torch.while_loop, torch.map ...): "
                         "control flow cannot be "
                         "placed op by op; rewrite the model without data-dependent control flow");
    if (target.rfind("torch.ops.", 0) == 0) {
      // torch.ops.<namespace>.<name>.<overload>
      const std::string rest = target.substr(10);
      const size_t first = rest.find('.');
      const size_t last = rest.rfind('.');
      if (first == std::string::npos || last == first)
        throw CaptureError(where + ": not an operator name");
      const std::string name =
          rest.substr(0, first) + "::" + rest.substr(first + 1, last - first - 1);
      std::string overload = rest.substr(last + 1);
      if (overload == "default") overload.clear();
      op.name = name;
      op.handle = find_operator(name, overload);
      if (!op.handle)
        throw CaptureError(
            where + ": this LibTorch (" + std::string(TORCH_VERSION) + ") has no operator " + name +
            (overload.empty() ? "" : "." + overload) +
            "; export with the torch the job runs, or load the library that registers it");
      add_operator(n, std::move(op), where);
      return;
    }
    op.call = export_schema::symbolic(target);
    if (!op.call)
      throw CaptureError(where + ": a call placementd cannot run (" + target +
                         "); only PyTorch operators and symbolic size arithmetic are supported");
    op.name = target;
    for (const auto& in : n.get_inputs()) op.inputs.push_back(argument(in.get_arg(), op, where));
    for (const auto& out : n.get_outputs()) {
      const auto name = output_name(out);
      op.outputs.push_back(name ? define(*name) : fresh());
      op.outputs_hold_tensors.push_back(false);
    }
    if (op.outputs.size() != 1) throw CaptureError(where + ": expected one result");
    program_.nodes.push_back(std::move(op));
  }

  void add_operator(const ex::Node& n, OpNode op, const std::string& where) {
    const c10::FunctionSchema& schema = op.handle->schema();
    std::unordered_map<std::string, const ex::Argument*> given;
    for (const auto& in : n.get_inputs()) given[in.get_name()] = &in.get_arg();
    for (const c10::Argument& arg : schema.arguments()) {
      auto it = given.find(arg.name());
      if (it != given.end()) {
        OpInput input =
            argument(*it->second, op, where + ", argument '" + arg.name() + "'", arg.type());
        // A Python number where the schema takes a Tensor (num_batches_tracked.add_(1), x / size):
        // Python's binding passes it as a wrapped number, which type promotion treats as a scalar.
        if (arg.type()->kind() == c10::TypeKind::TensorType &&
            it->second->tag() != ex::Argument::Tag::AS_TENSOR &&
            it->second->tag() != ex::Argument::Tag::AS_OPTIONAL_TENSOR &&
            it->second->tag() != ex::Argument::Tag::AS_NONE) {
          if (input.value < 0)
            input.constant = wrapped_number(input.constant);
          else
            input = wrap_at_run_time(input, op);
        }
        // The device a tensor had when exported: the op only checks it, and placement moves
        // tensors.
        if (op.name == "aten::_assert_tensor_metadata" && arg.name() == "device")
          input = OpInput::of(c10::IValue());
        if (input.value >= 0 && arg.type()->kind() != c10::TypeKind::TensorType &&
            is_tensor_type(arg.type()))
          input.nested_tensors = true;
        op.inputs.push_back(std::move(input));
        given.erase(it);
      } else if (arg.default_value()) {
        op.inputs.push_back(OpInput::of(*arg.default_value()));
      } else if (arg.type()->kind() == c10::TypeKind::OptionalType) {
        op.inputs.push_back(OpInput::of(c10::IValue()));
      } else {
        throw CaptureError(where + ": argument '" + arg.name() + "' of " + schema.name() +
                           " is missing");
      }
    }
    if (!given.empty())
      throw CaptureError(where + ": " + schema.name() + " has no argument '" +
                         given.begin()->first + "' (exported by another version of torch?)");
    const auto& returns = schema.returns();
    const auto& outs = n.get_outputs();
    for (const c10::Argument& r : returns) op.tensor_op |= is_tensor_type(r.type());
    // One Tensor[] result (split, unbind, chunk): the list, then its elements by name.
    if (returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType &&
        outs.size() == 1 && outs[0].tag() == ex::Argument::Tag::AS_TENSORS) {
      const int list_slot = fresh();
      op.outputs = {list_slot};
      op.outputs_hold_tensors = {true};
      OpNode unpack;
      unpack.kind = Kind::kListUnpack;
      unpack.name = "prim::ListUnpack";
      unpack.scope = op.scope;
      unpack.source = op.source;
      unpack.inputs = {OpInput::slot(list_slot, true)};
      for (const auto& t : outs[0].get_as_tensors()) {
        unpack.outputs.push_back(define(t.get_name()));
        unpack.outputs_hold_tensors.push_back(true);
      }
      program_.nodes.push_back(std::move(op));
      program_.nodes.push_back(std::move(unpack));
      return;
    }
    if (outs.size() > returns.size())
      throw CaptureError(where + ": " + std::to_string(outs.size()) + " outputs recorded, " +
                         schema.name() + " returns " + std::to_string(returns.size()));
    for (size_t i = 0; i < returns.size(); ++i) {
      const std::optional<std::string> name = i < outs.size() ? output_name(outs[i]) : std::nullopt;
      op.outputs.push_back(name ? define(*name) : fresh());
      op.outputs_hold_tensors.push_back(is_tensor_type(returns[i].type()));
    }
    program_.nodes.push_back(std::move(op));
  }

 private:
  static c10::IValue wrapped_number(const c10::IValue& value) {
    at::Tensor number = c10::scalar_to_tensor(value.toScalar());
    number.unsafeGetTensorImpl()->set_wrapped_number(true);
    return number;
  }

  // A symbolic size passed where a tensor is taken: wrapped when the step runs, ahead of its user.
  OpInput wrap_at_run_time(const OpInput& value, const OpNode& user) {
    OpNode node;
    node.name = "wrapped_number";
    node.scope = user.scope;
    node.source = user.source;
    node.inputs = {value};
    node.call = [](torch::jit::Stack& stack) { stack.back() = wrapped_number(stack.back()); };
    const int slot = fresh();
    node.outputs = {slot};
    node.outputs_hold_tensors = {false};
    program_.nodes.push_back(std::move(node));
    return OpInput::slot(slot);
  }

  // wrap_with_set_grad_enabled(enabled, subgraph, *args): code under torch.no_grad() or
  // torch.enable_grad() (Llama's rotary embedding). Its nodes are inlined between two that switch
  // autograd's mode and switch it back, as the Python code did.
  void inline_grad_mode_region(const ex::Node& n, const OpNode& site, const std::string& where) {
    const auto& in = n.get_inputs();
    if (in.size() < 2 || in[0].get_arg().tag() != ex::Argument::Tag::AS_BOOL ||
        in[1].get_arg().tag() != ex::Argument::Tag::AS_GRAPH)
      throw CaptureError(where + ": expected (enabled, subgraph, arguments...)");
    const bool enabled = in[0].get_arg().get_as_bool();
    const ex::Graph& sub = *in[1].get_arg().get_as_graph().get_graph();
    if (sub.get_inputs().size() != in.size() - 2)
      throw CaptureError(where + ": the subgraph takes " + std::to_string(sub.get_inputs().size()) +
                         " inputs, " + std::to_string(in.size() - 2) + " given");
    std::vector<OpInput> args;
    for (size_t i = 2; i < in.size(); ++i) args.push_back(argument(in[i].get_arg(), site, where));
    // The subgraph's names are its own: the outer ones are put back after it.
    const auto outer_slots = slots_;
    const auto outer_constants = constants_;
    const auto* outer_values = values_;
    describe_with(sub);
    for (size_t i = 0; i < args.size(); ++i) {
      const auto name = output_name(sub.get_inputs()[i]);
      if (!name) continue;
      if (args[i].value >= 0) {
        slots_[*name] = args[i].value;
        constants_.erase(*name);
      } else {
        constants_[*name] = args[i].constant;
      }
    }
    auto previous = std::make_shared<bool>(true);
    OpNode enter;
    enter.name = enabled ? "torch.enable_grad" : "torch.no_grad";
    enter.scope = site.scope;
    enter.call = [previous, enabled](torch::jit::Stack&) {
      *previous = at::GradMode::is_enabled();
      at::GradMode::set_enabled(enabled);
    };
    program_.nodes.push_back(std::move(enter));
    for (const ex::Node& node : sub.get_nodes()) add_node(node);
    std::vector<OpInput> results;
    for (const ex::Argument& out : sub.get_outputs()) results.push_back(argument(out, site, where));
    OpNode leave;
    leave.name = "torch.set_grad_enabled";
    leave.scope = site.scope;
    leave.call = [previous](torch::jit::Stack&) { at::GradMode::set_enabled(*previous); };
    program_.nodes.push_back(std::move(leave));
    slots_ = outer_slots;
    constants_ = outer_constants;
    values_ = outer_values;
    const auto& outs = n.get_outputs();
    if (outs.size() != results.size())
      throw CaptureError(where + ": " + std::to_string(outs.size()) +
                         " outputs recorded, the subgraph returns " +
                         std::to_string(results.size()));
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto name = output_name(outs[i]);
      if (!name) continue;
      if (results[i].value >= 0)
        slots_[*name] = results[i].value;
      else
        constants_[*name] = results[i].constant;
    }
  }

  void record(int slot, const ex::TensorMeta& meta) {
    RecordedTensor r;
    try {
      r.dtype = export_schema::scalar_type(meta.get_dtype());
    } catch (const CaptureError&) {
      return;  // a dtype this LibTorch does not know: the op that makes it says so when it runs
    }
    for (const ex::SymInt& s : meta.get_sizes()) r.shape.push_back(export_schema::known(s));
    for (const ex::SymInt& s : meta.get_strides()) r.strides.push_back(export_schema::known(s));
    program_.recorded[slot] = std::move(r);
  }

  OpProgram& program_;
  const std::unordered_map<std::string, ex::TensorMeta>* values_ = nullptr;
  std::unordered_map<std::string, int> slots_;
  std::unordered_map<std::string, c10::IValue> constants_;
};

const at::Tensor& tensor_named(const std::map<std::string, at::Tensor>& tensors,
                               const std::string& name, const std::string& origin) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw CaptureError(origin + ": the program reads '" + name +
                       "', which is not among its weights");
  return it->second;
}

}  // namespace

OpProgram from_export(const std::string& json, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& origin) {
  const ex::ExportedProgram exported = export_schema::parse_program(json, origin);
  const ex::GraphModule& module = exported.get_graph_module();
  const ex::Graph& graph = module.get_graph();
  const auto& input_specs = module.get_signature().get_input_specs();
  const auto& output_specs = module.get_signature().get_output_specs();

  OpProgram program;
  program.frontend = "export";
  program.origin = origin;
  Builder b(program);
  b.describe_with(graph);
  if (graph.get_inputs().size() != input_specs.size())
    throw CaptureError(origin + ": the graph has " + std::to_string(graph.get_inputs().size()) +
                       " inputs, its signature " + std::to_string(input_specs.size()));

  using In = ex::InputSpec::Tag;
  for (const ex::InputSpec& spec : input_specs) {
    switch (spec.tag()) {
      case In::USER_INPUT: {
        const ex::Argument& arg = spec.get_user_input().get_arg();
        // Tensors and symbolic integers; a user input of another kind is recorded as a constant
        // input (below), which the caller does not pass (the Python SDK drops those leaves).
        const auto name = b.output_name(arg);
        program.inputs.push_back(name ? b.define(*name) : b.fresh());
        break;
      }
      case In::PARAMETER: {
        const auto& p = spec.get_parameter();
        const at::Tensor& t = tensor_named(tensors, p.get_parameter_name(), origin);
        program.bound.emplace_back(b.define(p.get_arg().get_name()), t);
        const bool seen = std::any_of(program.parameters.begin(), program.parameters.end(),
                                      [&t](const at::Tensor& u) { return u.is_same(t); });
        if (!seen) {
          program.parameters.push_back(t);
          program.parameter_names.push_back(p.get_parameter_name());
        }
        break;
      }
      case In::BUFFER: {
        const auto& buffer = spec.get_buffer();
        const at::Tensor& t = tensor_named(tensors, buffer.get_buffer_name(), origin);
        program.bound.emplace_back(b.define(buffer.get_arg().get_name()), t);
        program.buffers.emplace_back(buffer.get_buffer_name(), t);
        break;
      }
      case In::TENSOR_CONSTANT: {
        const auto& c = spec.get_tensor_constant();
        program.bound.emplace_back(b.define(c.get_arg().get_name()),
                                   tensor_named(tensors, c.get_tensor_constant_name(), origin));
        break;
      }
      case In::CONSTANT_INPUT: {
        const auto& c = spec.get_constant_input();
        b.constant(c.get_name(), export_schema::constant_value(c.get_value()));
        break;
      }
      case In::CUSTOM_OBJ:
        throw CaptureError(origin + ": the program takes a custom object (" +
                           spec.get_custom_obj().get_custom_obj_name() +
                           "), which placementd cannot move between devices");
      case In::TOKEN:
        throw CaptureError(
            origin +
            ": the program has effect tokens (side-effecting custom ops), which placementd "
            "cannot order across devices");
    }
  }
  for (const ex::Node& node : graph.get_nodes()) b.add_node(node);

  using Out = ex::OutputSpec::Tag;
  if (graph.get_outputs().size() != output_specs.size())
    throw CaptureError(origin + ": the graph has " + std::to_string(graph.get_outputs().size()) +
                       " outputs, its signature " + std::to_string(output_specs.size()));
  for (size_t i = 0; i < output_specs.size(); ++i) {
    const ex::OutputSpec& spec = output_specs[i];
    const std::string where = origin + ": output " + std::to_string(i);
    switch (spec.tag()) {
      case Out::USER_OUTPUT:
      case Out::LOSS_OUTPUT:
        break;
      case Out::BUFFER_MUTATION: {
        const std::string& name = spec.get_buffer_mutation().get_buffer_name();
        program.buffer_updates.emplace_back(program.outputs.size(),
                                            tensor_named(tensors, name, origin));
        break;
      }
      default:
        throw CaptureError(
            where +
            " is not a user output or a buffer update (a joint forward-backward graph, an "
            "input mutated in place, or effect tokens); export the model's forward alone, "
            "with torch.export.export(model, args, strict=False)");
    }
    program.outputs.push_back(b.argument(graph.get_outputs()[i], OpNode{}, where));
  }
  program.complete();
  return program;
}

}  // namespace placement::detail
