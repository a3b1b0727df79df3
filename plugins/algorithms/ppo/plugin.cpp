#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "ppo.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "ppo";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "PPO with the clipped surrogate and an EMA baseline (EAGLE)";
  i.hyperparameters = ppo_params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params& p) {
  return std::make_unique<Ppo>(ppo_params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
