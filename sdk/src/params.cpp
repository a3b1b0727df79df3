#include "placement/params.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace placement {

const char* param_type_name(const ParamValue& value) {
  static const char* names[] = {"bool", "int", "float", "string"};
  return names[value.index()];
}

std::string format_param(const ParamValue& value) {
  if (auto b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (auto i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (auto d = std::get_if<double>(&value)) {
    std::ostringstream out;
    out << *d;
    std::string text = out.str();
    // Keep it readable as a float in TOML ("1" would read back as an integer).
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
    return text;
  }
  std::string quoted = "\"";
  for (char c : std::get<std::string>(value)) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::vector<ParamError> resolve_params(const std::vector<HyperParameter>& declared,
                                       const Params& given, Params* resolved) {
  std::vector<ParamError> errors;
  Params out;
  for (const HyperParameter& p : declared) out[p.name] = p.default_value;
  for (const auto& [name, value] : given) {
    const HyperParameter* decl = nullptr;
    for (const HyperParameter& p : declared)
      if (p.name == name) decl = &p;
    if (!decl) {
      std::string known;
      for (const HyperParameter& p : declared) known += (known.empty() ? "" : ", ") + p.name;
      errors.push_back({name, "unknown hyperparameter (accepted: " +
                                  (known.empty() ? std::string("none") : known) + ")"});
      continue;
    }
    ParamValue v = value;
    // An integer literal where a float is declared is what a person means ("lr = 1").
    if (std::holds_alternative<double>(decl->default_value) && std::holds_alternative<int64_t>(v))
      v = static_cast<double>(std::get<int64_t>(v));
    if (v.index() != decl->default_value.index()) {
      errors.push_back({name, std::string("expected ") + param_type_name(decl->default_value) +
                                  ", got " + param_type_name(value) + " " + format_param(value)});
      continue;
    }
    if (!std::holds_alternative<std::string>(v) && !std::holds_alternative<bool>(v)) {
      const double x = std::holds_alternative<double>(v)
                           ? std::get<double>(v)
                           : static_cast<double>(std::get<int64_t>(v));
      if (!std::isfinite(x)) {
        errors.push_back({name, "must be a finite number, got " + format_param(v)});
        continue;
      }
      if (decl->min && x < *decl->min) {
        errors.push_back(
            {name, "must be >= " + format_param(*decl->min) + ", got " + format_param(v)});
        continue;
      }
      if (decl->max && x > *decl->max) {
        errors.push_back(
            {name, "must be <= " + format_param(*decl->max) + ", got " + format_param(v)});
        continue;
      }
    }
    if (auto s = std::get_if<std::string>(&v); s && !decl->choices.empty()) {
      bool ok = false;
      std::string list;
      for (const std::string& c : decl->choices) {
        ok = ok || c == *s;
        list += (list.empty() ? "" : ", ") + c;
      }
      if (!ok) {
        errors.push_back({name, "must be one of " + list + ", got " + format_param(v)});
        continue;
      }
    }
    out[name] = v;
  }
  if (errors.empty() && resolved) *resolved = std::move(out);
  return errors;
}

namespace {

template <typename T>
const T& typed(const Params& params, const std::string& name, const char* type) {
  auto it = params.find(name);
  if (it == params.end()) throw std::invalid_argument("hyperparameter '" + name + "' is not set");
  if (auto v = std::get_if<T>(&it->second)) return *v;
  throw std::invalid_argument("hyperparameter '" + name + "' is not a " + type);
}

}  // namespace

bool param_bool(const Params& p, const std::string& n) { return typed<bool>(p, n, "bool"); }
int64_t param_int(const Params& p, const std::string& n) { return typed<int64_t>(p, n, "int"); }
double param_float(const Params& p, const std::string& n) { return typed<double>(p, n, "float"); }
std::string param_string(const Params& p, const std::string& n) {
  return typed<std::string>(p, n, "string");
}

}  // namespace placement
