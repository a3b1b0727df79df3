#pragma once
// For the throwing test plugins: throws from the entry point the plugin's `entry` hyperparameter
// names, once `after` calls of it went well, as a plugin with a bug would (a std::exception, like a
// c10::Error, or something that is not one); or first takes `stall_ms` there, as policy work that
// holds its session for a while does (`exception = "none"`: it only stalls).

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "placement/param_table.h"
#include "placement/plugin.h"

namespace placement::testing {

struct ThrowAtOptions {
  enum class Exception { kStd, kOther, kNone };
  std::string entry = "none";
  int64_t after = 0;
  Exception exception = Exception::kStd;
  int64_t stall_ms = 0;
};

class ThrowAt {
 public:
  /// The hyperparameters that say where a throwing plugin throws (`entries`: its entry points).
  static ParamTable<ThrowAtOptions> params(std::vector<std::string> entries) {
    using O = ThrowAtOptions;
    entries.insert(entries.begin(), "none");
    return ParamTable<O>()
        .add("entry", &O::entry, "the entry point that throws", std::move(entries))
        .add("after", &O::after, "calls of it that succeed first", {0, 1e6})
        .add("exception", &O::exception, "what it throws",
             {{"std", O::Exception::kStd},
              {"other", O::Exception::kOther},
              {"none", O::Exception::kNone}})
        .add("stall_ms", &O::stall_ms, "how long it takes there first", {0, 60000});
  }

  /// A throwing plugin's info: named "throwing", with the hyperparameters of `params`.
  static PluginInfo info(PluginKind kind, const std::string& does,
                         const ParamTable<ThrowAtOptions>& params) {
    PluginInfo i;
    i.name = "throwing";
    i.kind = kind;
    i.version = "1.0.0";
    i.summary = "test: " + does + "; throws from the entry point `entry` names";
    i.hyperparameters = params.declared();
    return i;
  }

  explicit ThrowAt(const ThrowAtOptions& options) : options_(options) {}

  void operator()(const std::string& entry) {
    if (entry != options_.entry || calls_++ < options_.after) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.stall_ms));
    if (options_.exception == ThrowAtOptions::Exception::kNone) return;
    if (options_.exception == ThrowAtOptions::Exception::kStd)
      throw std::runtime_error("test plugin: " + entry + " exploded");
    throw 42;  // NOLINT: deliberately not a std::exception
  }

 private:
  ThrowAtOptions options_;
  int64_t calls_ = 0;
};

}  // namespace placement::testing
