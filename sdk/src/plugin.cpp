// Names of plugin kinds, and the interfaces' out-of-line destructors: defining them here gives each
// interface one vtable and type_info in libplacement, shared by the daemon and every plugin.

#include <stdexcept>

#include "placement/algorithm.h"
#include "placement/grouper.h"
#include "placement/placer.h"
#include "placement/plugin.h"
#include "placement/policy.h"

namespace placement {

const char* to_string(PluginKind kind) {
  switch (kind) {
    case PluginKind::kGrouper:
      return "grouper";
    case PluginKind::kPlacer:
      return "placer";
    case PluginKind::kAlgorithm:
      return "algorithm";
  }
  return "unknown";
}

PluginKind plugin_kind_from_string(const std::string& text) {
  if (text == "grouper") return PluginKind::kGrouper;
  if (text == "placer") return PluginKind::kPlacer;
  if (text == "algorithm") return PluginKind::kAlgorithm;
  throw std::invalid_argument("unknown plugin kind '" + text +
                              "' (expected grouper, placer or algorithm)");
}

TrainablePolicy::~TrainablePolicy() = default;

std::vector<double> TrainablePolicy::log_probs(const std::vector<Action>& actions) {
  std::vector<double> out;
  out.reserve(actions.size());
  for (const Action& a : actions) out.push_back(log_prob(a));
  return out;
}
Grouper::~Grouper() = default;
Placer::~Placer() = default;
Algorithm::~Algorithm() = default;

}  // namespace placement
