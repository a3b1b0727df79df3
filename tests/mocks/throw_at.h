#pragma once
// For the throwing test plugins: throws from the entry point the plugin's `entry` hyperparameter
// names, once `after` calls of it went well, as a plugin with a bug would (a std::exception, like a
// c10::Error, or something that is not one).

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/params.h"
#include "placement/plugin.h"

namespace placement::testing {

class ThrowAt {
 public:
  /// A throwing plugin's info: named "throwing", with the hyperparameters that say where it throws
  /// (`entries`: its entry points).
  static PluginInfo info(PluginKind kind, const std::string& does, std::vector<std::string> entries) {
    PluginInfo i;
    i.name = "throwing";
    i.kind = kind;
    i.version = "1.0.0";
    i.summary = "test: " + does + "; throws from the entry point `entry` names";
    entries.insert(entries.begin(), "none");
    i.hyperparameters = {
        {"entry", std::string("none"), "the entry point that throws", std::nullopt, std::nullopt, entries},
        {"after", int64_t{0}, "calls of it that succeed first", 0.0, 1e6, {}},
        {"exception", std::string("std"), "what it throws", std::nullopt, std::nullopt, {"std", "other"}}};
    return i;
  }

  explicit ThrowAt(const Params& params)
      : entry_(param_string(params, "entry")),
        after_(param_int(params, "after")),
        std_(param_string(params, "exception") == "std") {}

  void operator()(const std::string& entry) {
    if (entry != entry_ || calls_++ < after_) return;
    if (std_) throw std::runtime_error("test plugin: " + entry + " exploded");
    throw 42;  // NOLINT: deliberately not a std::exception
  }

 private:
  std::string entry_;
  int64_t after_;
  bool std_;
  int64_t calls_ = 0;
};

}  // namespace placement::testing
