#include "export_schema.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <torch/version.h>

#include "export_frontend.h"
#include "placement/capture_error.h"

namespace placement::detail::export_schema {

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

}  // namespace placement::detail::export_schema
