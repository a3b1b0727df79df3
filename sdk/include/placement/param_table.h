#pragma once
// A plugin's hyperparameters, declared once: each row ties a name, a summary and a range to a
// member of the plugin's options struct, and the member's initializer is the default. info()
// returns declared() and the factory builds its object from read(), so the declaration, the
// default and the parsing cannot drift apart.
//
// Example:
//   struct MyPlacerOptions {
//     int64_t hidden = 256;
//     bool gpus_only = true;
//   };
//   const ParamTable<MyPlacerOptions>& my_placer_params() {
//     static const auto table = ParamTable<MyPlacerOptions>()
//                                   .add("hidden", &MyPlacerOptions::hidden, "hidden size", {1,
//                                   4096}) .add("gpus_only", &MyPlacerOptions::gpus_only, "CUDA
//                                   devices only");
//     return table;
//   }
//   // info():   i.hyperparameters = my_placer_params().declared();
//   // create(): return std::make_unique<MyPlacer>(my_placer_params().read(params));

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "placement/params.h"

namespace placement {

/// Inclusive bounds of a numeric hyperparameter; a side left empty is open.
struct Bounds {
  std::optional<double> min;
  std::optional<double> max;
};

/// The hyperparameters of a plugin whose settings are the members of `Options`; a
/// default-constructed `Options` holds every default. Rows keep the order they were added in
/// (the order `placementctl plugins` shows). Built once, e.g. as a function-local static; the
/// const members are then safe to call from any thread.
///
/// add() and include() throw std::logic_error for a name added twice or a default outside its
/// own bounds or choices: a bug in the plugin, which the registry then skips with that message.
template <class Options>
class ParamTable {
 public:
  /// A true/false switch.
  ParamTable& add(std::string name, bool Options::*member, std::string summary) {
    return add_value(std::move(name), member, std::move(summary), {}, {});
  }
  /// An integer, optionally bounded.
  ParamTable& add(std::string name, int64_t Options::*member, std::string summary,
                  Bounds bounds = {}) {
    return add_value(std::move(name), member, std::move(summary), bounds, {});
  }
  /// A float, optionally bounded; an integer given in TOML is accepted for it.
  ParamTable& add(std::string name, double Options::*member, std::string summary,
                  Bounds bounds = {}) {
    return add_value(std::move(name), member, std::move(summary), bounds, {});
  }
  /// A string, limited to `choices` unless they are empty.
  ParamTable& add(std::string name, std::string Options::*member, std::string summary,
                  std::vector<std::string> choices = {}) {
    return add_value(std::move(name), member, std::move(summary), {}, std::move(choices));
  }
  /// An enum, declared as a string whose choices are the texts of `choices`, in that order.
  template <class Enum, class = std::enable_if_t<std::is_enum_v<Enum>>>
  ParamTable& add(std::string name, Enum Options::*member, std::string summary,
                  std::vector<std::pair<std::string, Enum>> choices) {
    std::vector<std::string> texts;
    for (const auto& choice : choices) texts.push_back(choice.first);
    auto get = [member, choices, name](const Options& options) {
      for (const auto& [text, value] : choices)
        if (value == options.*member) return ParamValue(std::in_place_type<std::string>, text);
      throw std::logic_error("hyperparameter '" + name + "': the default is none of its choices");
    };
    auto set = [member, choices, name](const Params& params, Options& options) {
      const std::string text = param_string(params, name);
      for (const auto& [choice, value] : choices)
        if (choice == text) {
          options.*member = value;
          return;
        }
      throw std::invalid_argument("hyperparameter '" + name + "' is not one of its choices");
    };
    return append(
        {{std::move(name), {}, std::move(summary), std::nullopt, std::nullopt, std::move(texts)},
         std::move(get),
         std::move(set)});
  }

  /// Appends the rows of `part`, whose options are the `member` of these. The defaults are those
  /// of `Options{}.*member`, checked again against each row's range.
  template <class Part>
  ParamTable& include(const ParamTable<Part>& part, Part Options::*member) {
    for (const auto& row : part.rows_)
      append({row.declared,
              [get = row.get, member](const Options& options) { return get(options.*member); },
              [set = row.set, member](const Params& params, Options& options) {
                set(params, options.*member);
              }});
    return *this;
  }

  /// What the plugin's info() returns as PluginInfo::hyperparameters.
  std::vector<HyperParameter> declared() const {
    std::vector<HyperParameter> out;
    out.reserve(rows_.size());
    for (const Row& row : rows_) out.push_back(row.declared);
    return out;
  }

  /// The options for `resolved` parameters (resolve_params' output: every declared name present
  /// with its declared type). Throws std::invalid_argument if one is missing or of another type.
  Options read(const Params& resolved) const {
    Options options;
    for (const Row& row : rows_) row.set(resolved, options);
    return options;
  }

 private:
  template <class>
  friend class ParamTable;

  struct Row {
    /// Its default_value is filled in by append(), from Options{}.
    HyperParameter declared;
    std::function<ParamValue(const Options&)> get;
    std::function<void(const Params&, Options&)> set;
  };

  template <class T>
  ParamTable& add_value(std::string name, T Options::*member, std::string summary, Bounds bounds,
                        std::vector<std::string> choices) {
    auto get = [member](const Options& options) {
      return ParamValue(std::in_place_type<T>, options.*member);
    };
    auto set = [member, name](const Params& params, Options& options) {
      options.*member = typed<T>(params, name);
    };
    return append(
        {{std::move(name), {}, std::move(summary), bounds.min, bounds.max, std::move(choices)},
         std::move(get),
         std::move(set)});
  }

  template <class T>
  static T typed(const Params& params, const std::string& name) {
    if constexpr (std::is_same_v<T, bool>)
      return param_bool(params, name);
    else if constexpr (std::is_same_v<T, int64_t>)
      return param_int(params, name);
    else if constexpr (std::is_same_v<T, double>)
      return param_float(params, name);
    else
      return param_string(params, name);
  }

  ParamTable& append(Row row) {
    const std::string& name = row.declared.name;
    for (const Row& existing : rows_)
      if (existing.declared.name == name)
        throw std::logic_error("hyperparameter '" + name + "' is declared twice");
    row.declared.default_value = row.get(Options{});
    // The check an admin's value gets, applied to the default: one definition of "in range".
    const std::vector<ParamError> errors =
        resolve_params({row.declared}, {{name, row.declared.default_value}}, nullptr);
    if (!errors.empty())
      throw std::logic_error("hyperparameter '" + name + "': default " + errors.front().message);
    rows_.push_back(std::move(row));
    return *this;
  }

  std::vector<Row> rows_;
};

}  // namespace placement
