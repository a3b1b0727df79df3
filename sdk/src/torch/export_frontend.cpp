#include "export_frontend.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include <ATen/ScalarOps.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <c10/util/safe_numerics.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/utils/generated_serialization_types.h>
#include <torch/version.h>

#include "placement/capture.h"

namespace placement::detail {

namespace ex = torch::_export;

namespace {

using Kind = OpNode::Kind;

c10::ScalarType scalar_type(ex::ScalarType t) {
  switch (t) {
    case ex::ScalarType::BYTE:
      return c10::ScalarType::Byte;
    case ex::ScalarType::CHAR:
      return c10::ScalarType::Char;
    case ex::ScalarType::SHORT:
      return c10::ScalarType::Short;
    case ex::ScalarType::INT:
      return c10::ScalarType::Int;
    case ex::ScalarType::LONG:
      return c10::ScalarType::Long;
    case ex::ScalarType::HALF:
      return c10::ScalarType::Half;
    case ex::ScalarType::FLOAT:
      return c10::ScalarType::Float;
    case ex::ScalarType::DOUBLE:
      return c10::ScalarType::Double;
    case ex::ScalarType::COMPLEXHALF:
      return c10::ScalarType::ComplexHalf;
    case ex::ScalarType::COMPLEXFLOAT:
      return c10::ScalarType::ComplexFloat;
    case ex::ScalarType::COMPLEXDOUBLE:
      return c10::ScalarType::ComplexDouble;
    case ex::ScalarType::BOOL:
      return c10::ScalarType::Bool;
    case ex::ScalarType::BFLOAT16:
      return c10::ScalarType::BFloat16;
    case ex::ScalarType::UINT16:
      return c10::ScalarType::UInt16;
    case ex::ScalarType::FLOAT8E4M3FN:
      return c10::ScalarType::Float8_e4m3fn;
    case ex::ScalarType::FLOAT8E5M2:
      return c10::ScalarType::Float8_e5m2;
    case ex::ScalarType::FLOAT8E4M3FNUZ:
      return c10::ScalarType::Float8_e4m3fnuz;
    case ex::ScalarType::FLOAT8E5M2FNUZ:
      return c10::ScalarType::Float8_e5m2fnuz;
    default:
      break;
  }
  throw CaptureError("unknown dtype " + std::to_string(static_cast<int>(t)));
}

c10::Layout layout(ex::Layout l) {
  switch (l) {
    case ex::Layout::Strided:
      return c10::kStrided;
    case ex::Layout::SparseCoo:
      return c10::kSparse;
    case ex::Layout::SparseCsr:
      return c10::kSparseCsr;
    case ex::Layout::SparseCsc:
      return c10::kSparseCsc;
    case ex::Layout::SparseBsr:
      return c10::kSparseBsr;
    case ex::Layout::SparseBsc:
      return c10::kSparseBsc;
    case ex::Layout::_mkldnn:
      return c10::kMkldnn;
    default:
      break;
  }
  throw CaptureError("unknown layout " + std::to_string(static_cast<int>(l)));
}

c10::MemoryFormat memory_format(ex::MemoryFormat f) {
  switch (f) {
    case ex::MemoryFormat::ContiguousFormat:
      return c10::MemoryFormat::Contiguous;
    case ex::MemoryFormat::ChannelsLast:
      return c10::MemoryFormat::ChannelsLast;
    case ex::MemoryFormat::ChannelsLast3d:
      return c10::MemoryFormat::ChannelsLast3d;
    case ex::MemoryFormat::PreserveFormat:
      return c10::MemoryFormat::Preserve;
    default:
      break;
  }
  throw CaptureError("unknown memory format " + std::to_string(static_cast<int>(f)));
}

// A size as the example had it (a dynamic one's example value), or -1 without one (a size that
// depends on the data, such as nonzero's).
int64_t known(const ex::SymInt& s) {
  if (s.tag() == ex::SymInt::Tag::AS_INT) return s.get_as_int();
  const auto& hint = s.get_as_expr().get_hint();
  if (hint && hint->tag() == ex::SymExprHint::Tag::AS_INT) return hint->get_as_int();
  return -1;
}

int64_t concrete(const ex::SymInt& s) {
  if (const int64_t size = known(s); size >= 0) return size;
  throw CaptureError("a symbolic size (" + s.get_as_expr().get_expr_str() +
                     ") without an example value");
}

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

// Python's symbolic arithmetic that torch.export keeps for dynamic shapes (operator.mul on a
// batch size). Integers stay integers, as in Python.
std::function<void(torch::jit::Stack&)> symbolic(const std::string& target) {
  using Fn = std::function<c10::IValue(const std::vector<c10::IValue>&)>;
  auto num = [](const c10::IValue& v) {
    return v.isInt() ? static_cast<double>(v.toInt()) : v.isBool() ? v.toBool() : v.toDouble();
  };
  auto ints = [](const std::vector<c10::IValue>& a) {
    return std::all_of(a.begin(), a.end(),
                       [](const c10::IValue& v) { return v.isInt() || v.isBool(); });
  };
  auto as_int = [](const c10::IValue& v) {
    return v.isBool() ? static_cast<int64_t>(v.toBool()) : v.toInt();
  };
  auto arith = [=](auto int_op, auto double_op) -> Fn {
    return [=](const std::vector<c10::IValue>& a) -> c10::IValue {
      if (ints(a)) return int_op(as_int(a.at(0)), as_int(a.at(1)));
      return double_op(num(a.at(0)), num(a.at(1)));
    };
  };
  auto compare = [=](auto op) -> Fn {
    return [=](const std::vector<c10::IValue>& a) -> c10::IValue {
      return op(num(a.at(0)), num(a.at(1)));
    };
  };
  static const auto floor_div = [](int64_t a, int64_t b) {
    if (b == 0) throw std::runtime_error("integer division by zero in a symbolic size");
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  const std::unordered_map<std::string, Fn> table = {
      {"_operator.add",
       arith([](int64_t a, int64_t b) { return a + b; }, [](double a, double b) { return a + b; })},
      {"_operator.sub",
       arith([](int64_t a, int64_t b) { return a - b; }, [](double a, double b) { return a - b; })},
      {"_operator.mul",
       arith([](int64_t a, int64_t b) { return a * b; }, [](double a, double b) { return a * b; })},
      {"_operator.floordiv", arith([](int64_t a, int64_t b) { return floor_div(a, b); },
                                   [](double a, double b) { return std::floor(a / b); })},
      {"_operator.mod", arith([](int64_t a, int64_t b) { return a - floor_div(a, b) * b; },
                              [](double a, double b) { return a - std::floor(a / b) * b; })},
      {"_operator.truediv",
       [=](const std::vector<c10::IValue>& a) -> c10::IValue {
         return num(a.at(0)) / num(a.at(1));
       }},
      {"_operator.pow",
       [=](const std::vector<c10::IValue>& a) -> c10::IValue {
         // Python: int ** non-negative int is an int, anything else a float.
         if (ints(a) && as_int(a.at(1)) >= 0)
           return static_cast<int64_t>(std::llround(std::pow(as_int(a.at(0)), as_int(a.at(1)))));
         return std::pow(num(a.at(0)), num(a.at(1)));
       }},
      {"torch.sym_max", arith([](int64_t a, int64_t b) { return std::max(a, b); },
                              [](double a, double b) { return std::max(a, b); })},
      {"torch.sym_min", arith([](int64_t a, int64_t b) { return std::min(a, b); },
                              [](double a, double b) { return std::min(a, b); })},
      {"_operator.eq", compare([](double a, double b) { return a == b; })},
      {"_operator.ne", compare([](double a, double b) { return a != b; })},
      {"_operator.lt", compare([](double a, double b) { return a < b; })},
      {"_operator.le", compare([](double a, double b) { return a <= b; })},
      {"_operator.gt", compare([](double a, double b) { return a > b; })},
      {"_operator.ge", compare([](double a, double b) { return a >= b; })},
      {"_operator.and_",
       arith([](int64_t a, int64_t b) { return a & b; },
             [](double, double) -> double { throw std::runtime_error("& of floats"); })},
      {"_operator.or_",
       arith([](int64_t a, int64_t b) { return a | b; },
             [](double, double) -> double { throw std::runtime_error("| of floats"); })},
      {"_operator.neg",
       [=](const std::vector<c10::IValue>& a) -> c10::
                                                  IValue {
                                                    return a.at(0).isInt()
                                                               ? c10::IValue(-a.at(0).toInt())
                                                               : c10::IValue(-num(a.at(0)));
                                                  }},
      {"_operator.pos", [](const std::vector<c10::IValue>& a) -> c10::IValue { return a.at(0); }},
      {"torch.sym_not",
       [](const std::vector<c10::IValue>& a) -> c10::IValue { return !a.at(0).toBool(); }},
      {"torch.sym_int",
       [=](const std::vector<c10::IValue>& a)
           -> c10::IValue { return static_cast<int64_t>(num(a.at(0))); }},
      {"math.trunc",
       [=](const std::vector<c10::IValue>& a)
           -> c10::IValue { return static_cast<int64_t>(std::trunc(num(a.at(0)))); }},
      {"torch.sym_float",
       [=](const std::vector<c10::IValue>& a) -> c10::IValue { return num(a.at(0)); }},
      {"torch.sym_sqrt",
       [=](const std::vector<c10::IValue>& a) -> c10::IValue { return std::sqrt(num(a.at(0))); }},
      {"torch.sym_ite",
       [](const std::vector<c10::IValue>& a)
           -> c10::IValue { return a.at(0).toBool() ? a.at(1) : a.at(2); }},
  };
  auto it = table.find(target);
  if (it == table.end()) return {};
  Fn fn = it->second;
  return [fn](torch::jit::Stack& stack) {
    c10::IValue result = fn(stack);
    stack.assign(1, std::move(result));
  };
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
        return OpInput::of(static_cast<int64_t>(scalar_type(a.get_as_scalar_type())));
      case Tag::AS_LAYOUT:
        return OpInput::of(static_cast<int64_t>(layout(a.get_as_layout())));
      case Tag::AS_MEMORY_FORMAT:
        return OpInput::of(static_cast<int64_t>(memory_format(a.get_as_memory_format())));
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
    op.call = symbolic(target);
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
      r.dtype = scalar_type(meta.get_dtype());
    } catch (const CaptureError&) {
      return;  // a dtype this LibTorch does not know: the op that makes it says so when it runs
    }
    for (const ex::SymInt& s : meta.get_sizes()) r.shape.push_back(known(s));
    for (const ex::SymInt& s : meta.get_strides()) r.strides.push_back(known(s));
    program_.recorded[slot] = std::move(r);
  }

  OpProgram& program_;
  const std::unordered_map<std::string, ex::TensorMeta>* values_ = nullptr;
  std::unordered_map<std::string, int> slots_;
  std::unordered_map<std::string, c10::IValue> constants_;
};

c10::IValue constant_value(const ex::ConstantValue& v) {
  using Tag = ex::ConstantValue::Tag;
  switch (v.tag()) {
    case Tag::AS_NONE:
      return c10::IValue();
    case Tag::AS_INT:
      return v.get_as_int();
    case Tag::AS_FLOAT:
      return v.get_as_float().get();
    case Tag::AS_STRING:
      return v.get_as_string();
    case Tag::AS_BOOL:
      return v.get_as_bool();
    default:
      break;
  }
  throw CaptureError("a constant input of an unknown kind");
}

const at::Tensor& tensor_named(const std::map<std::string, at::Tensor>& tensors,
                               const std::string& name, const std::string& origin) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw CaptureError(origin + ": the program reads '" + name +
                       "', which is not among its weights");
  return it->second;
}

ex::ExportedProgram parse_program(const std::string& json, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw CaptureError(origin + ": the program is not valid JSON (" + e.what() + ")");
  }
  int major = -1;
  int minor = -1;
  if (j.is_object() && j.contains("schema_version") && j["schema_version"].is_object()) {
    const auto& version = j["schema_version"];
    if (version.contains("major") && version["major"].is_number_integer())
      major = version["major"].get<int>();
    if (version.contains("minor") && version["minor"].is_number_integer())
      minor = version["minor"].get<int>();
  }
  if (major < 0) throw CaptureError(origin + ": not a torch.export program (no schema_version)");
  if (major != kExportSchemaMajor)
    throw CaptureError(origin + ": exported with schema " + std::to_string(major) + "." +
                       std::to_string(minor) + ", this LibTorch (" + TORCH_VERSION +
                       ") reads schema " + std::to_string(kExportSchemaMajor) +
                       ".x; export with the torch the job runs");
  try {
    return j.get<ex::ExportedProgram>();
  } catch (const std::exception& e) {
    throw CaptureError(origin + ": the program does not match export schema " +
                       std::to_string(kExportSchemaMajor) + " (" + e.what() + ")");
  }
}

}  // namespace

OpProgram from_export(const std::string& json, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& origin) {
  const ex::ExportedProgram exported = parse_program(json, origin);
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
        b.constant(c.get_name(), constant_value(c.get_value()));
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

namespace {

class Archive {
 public:
  explicit Archive(const std::string& path) : path_(path) {
    try {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    } catch (const std::exception& e) {
      std::string message = e.what();
      if (const auto cut = message.find('\n'); cut != std::string::npos) message.resize(cut);
      throw CaptureError(path + ": not a readable .pt2 archive (" + message + ")");
    }
  }
  bool has(const std::string& name) const { return reader_->hasRecord(name); }
  std::string text(const std::string& name) const {
    at::DataPtr data;
    size_t size = 0;
    read(name, data, size);
    return std::string(static_cast<const char*>(data.get()), size);
  }
  void read(const std::string& name, at::DataPtr& data, size_t& size) const {
    if (!reader_->hasRecord(name)) throw CaptureError(path_ + ": the archive has no " + name);
    try {
      std::tie(data, size) = reader_->getRecord(name);
    } catch (const std::exception& e) {
      std::string message = e.what();
      if (const auto cut = message.find('\n'); cut != std::string::npos) message.resize(cut);
      throw CaptureError(path_ + ": " + name + " cannot be read (" + message +
                         "): is the archive complete?");
    }
  }
  std::vector<std::string> records() const { return reader_->getAllRecords(); }

 private:
  std::string path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

// Parameters, buffers or constants of a .pt2 by name, from one payload config. Names that share a
// payload (tied weights) share its storage; the same view of it is the same tensor.
void read_payloads(const Archive& archive, const std::string& config_name, const std::string& dir,
                   bool weights, const std::string& path, std::map<std::string, at::Tensor>& out) {
  if (!archive.has(config_name)) return;
  ex::PayloadConfig config;
  try {
    config = nlohmann::json::parse(archive.text(config_name)).get<ex::PayloadConfig>();
  } catch (const std::exception& e) {
    throw CaptureError(path + ": " + config_name + " is not a payload config (" + e.what() + ")");
  }
  std::map<std::string, c10::Storage> storages;
  std::map<std::string, at::Tensor> views;
  for (const auto& [name, payload] : config.get_config()) {
    if (payload.get_use_pickle() || !payload.get_tensor_meta())
      throw CaptureError(path + ": '" + name +
                         "' is a pickled object (a tensor subclass or custom object), which "
                         "placementd cannot read");
    const ex::TensorMeta& meta = *payload.get_tensor_meta();
    std::vector<int64_t> sizes, strides;
    for (const auto& s : meta.get_sizes()) sizes.push_back(concrete(s));
    for (const auto& s : meta.get_strides()) strides.push_back(concrete(s));
    const int64_t offset = concrete(meta.get_storage_offset());
    const c10::ScalarType dtype = scalar_type(meta.get_dtype());
    const std::string what = path + ": '" + name + "'";
    if (sizes.size() != strides.size())
      throw CaptureError(what + " has " + std::to_string(sizes.size()) + " sizes and " +
                         std::to_string(strides.size()) + " strides");
    if (offset < 0 || std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v < 0; }) ||
        std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v < 0; }))
      throw CaptureError(what + " has a negative size, stride or offset");
    if (meta.get_requires_grad() && !c10::isFloatingType(dtype) && !c10::isComplexType(dtype))
      throw CaptureError(what + " is a " + c10::toString(dtype) + " tensor that requires grad");
    const std::string key = payload.get_path_name() + "|" + std::to_string(offset) + "|" +
                            c10::toString(dtype) + "|" + c10::str(c10::IntArrayRef(sizes)) +
                            c10::str(c10::IntArrayRef(strides));
    // A model exported on the meta device has no storages: its payloads all share one empty
    // record, and equal shapes are not the same tensor.
    const bool exported_on_meta = meta.get_device().get_type() == "meta";
    at::Tensor tensor;
    if (auto seen = views.find(key); seen != views.end() && !exported_on_meta) {
      tensor = seen->second;
    } else if (!weights || exported_on_meta) {
      tensor =
          at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype).device(at::kMeta));
    } else {
      auto storage = storages.find(payload.get_path_name());
      if (storage == storages.end()) {
        at::DataPtr data;
        size_t size = 0;
        archive.read(dir + payload.get_path_name(), data, size);
        at::Tensor bytes =
            at::empty({static_cast<int64_t>(size)}, at::TensorOptions().dtype(at::kByte));
        if (size > 0) std::memcpy(bytes.data_ptr(), data.get(), size);
        storage = storages.emplace(payload.get_path_name(), bytes.storage()).first;
      }
      // The last element's byte, in unsigned arithmetic that cannot wrap unnoticed: the sizes,
      // strides and offset come from the file.
      const bool empty = std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v == 0; });
      uint64_t last = static_cast<uint64_t>(offset);
      bool overflow = false;
      for (size_t d = 0; d < sizes.size() && !empty; ++d) {
        uint64_t span = 0;
        overflow |= c10::mul_overflows(static_cast<uint64_t>(sizes[d] - 1),
                                       static_cast<uint64_t>(strides[d]), &span);
        overflow |= c10::add_overflows(last, span, &last);
      }
      uint64_t needed = 0;
      overflow |= c10::add_overflows(last, uint64_t{1}, &last);
      overflow |= c10::mul_overflows(last, static_cast<uint64_t>(c10::elementSize(dtype)), &needed);
      if (!empty && (overflow || needed > storage->second.nbytes()))
        throw CaptureError(what + " needs " +
                           (overflow ? std::string("more than 2^64") : std::to_string(needed)) +
                           " bytes, " + dir + payload.get_path_name() + " holds " +
                           std::to_string(storage->second.nbytes()));
      tensor = at::empty({0}, at::TensorOptions().dtype(dtype))
                   .set_(storage->second, offset, sizes, strides);
    }
    if (meta.get_requires_grad() && !tensor.requires_grad()) tensor.set_requires_grad(true);
    views[key] = tensor;
    out[name] = tensor;
  }
}

}  // namespace

bool is_pt2(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || std::string(magic, 4) != std::string("PK\x03\x04", 4)) return false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string& r : reader.getAllRecords())
      if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0)
        return true;
  } catch (const std::exception&) {
    // A damaged archive: a torch.export.save file whose records cannot be listed says so when
    // loaded.
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".pt2") == 0;
  }
  return false;
}

OpProgram load_pt2(const std::string& path, bool weights) {
  const Archive archive(path);
  std::string model = "model";
  if (!archive.has("models/model.json")) {
    std::vector<std::string> found;
    for (const std::string& r : archive.records())
      if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0)
        found.push_back(r.substr(7, r.size() - 12));
    if (found.size() != 1)
      throw CaptureError(path + ": " +
                         (found.empty() ? std::string("no program (models/*.json) in the archive")
                                        : "the archive holds " + std::to_string(found.size()) +
                                              " programs; save one model per file"));
    model = found[0];
  }
  if (archive.has("archive_format") && archive.text("archive_format") != "pt2")
    throw CaptureError(path + ": archive format '" + archive.text("archive_format") + "', not pt2");
  std::map<std::string, at::Tensor> tensors;
  read_payloads(archive, "data/weights/" + model + "_weights_config.json", "data/weights/", weights,
                path, tensors);
  read_payloads(archive, "data/constants/" + model + "_constants_config.json", "data/constants/",
                weights, path, tensors);
  OpProgram program = from_export(archive.text("models/" + model + ".json"), tensors, path);
  return program;
}

}  // namespace placement::detail
