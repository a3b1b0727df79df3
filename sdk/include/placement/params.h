#pragma once
// Plugin hyperparameters: declared by each plugin with defaults, set by admins in TOML.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace placement {

/// One hyperparameter value. The alternative held by a declaration's default is its type.
using ParamValue = std::variant<bool, int64_t, double, std::string>;
/// Hyperparameters by name.
using Params = std::map<std::string, ParamValue>;

/// "bool", "int", "float" or "string".
const char* param_type_name(const ParamValue& value);
/// The value as TOML would write it: true, 3, 0.1, "text".
std::string format_param(const ParamValue& value);

/// A hyperparameter a plugin accepts.
struct HyperParameter {
  std::string name;
  ParamValue default_value;
  std::string summary;
  /// Inclusive bounds for numeric parameters.
  std::optional<double> min;
  std::optional<double> max;
  /// Allowed values for string parameters; empty means any.
  std::vector<std::string> choices;
};

/// One problem with a given parameter set, e.g. {"learning_rate", "must be >= 0, got -1"}.
struct ParamError {
  std::string name;
  std::string message;
};

/// Checks `given` against `declared`: unknown names, wrong types (an integer is accepted where a
/// float is declared), values out of range or not among the choices. Returns every problem found;
/// when there is none, `resolved` (if given) receives the declared defaults overridden by `given`.
std::vector<ParamError> resolve_params(const std::vector<HyperParameter>& declared,
                                       const Params& given, Params* resolved);

/// Typed read of a resolved parameter; throws std::invalid_argument if absent or of another type.
bool param_bool(const Params& params, const std::string& name);
int64_t param_int(const Params& params, const std::string& name);
double param_float(const Params& params, const std::string& name);
std::string param_string(const Params& params, const std::string& name);

}  // namespace placement
