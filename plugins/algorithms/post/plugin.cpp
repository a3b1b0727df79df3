#include "placement/plugin_export.h"
#include "post.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "post";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "Post: PPO plus cross-entropy minimisation on elite placements (Gao et al., NeurIPS'18)";
  i.hyperparameters = ppo_hyperparameters();
  i.hyperparameters.push_back({"elite_window", int64_t{50}, "samples between cross-entropy steps", 1.0, 100000.0, {}});
  i.hyperparameters.push_back({"elite_count", int64_t{5}, "best valid samples of a window to imitate", 1.0, 100000.0, {}});
  i.hyperparameters.push_back({"cross_entropy_weight", 1.0, "scale of the cross-entropy step", 0.0, 100.0, {}});
  return i;
}

std::vector<ParamError> validate(const Params& p) {
  if (param_int(p, "elite_count") > param_int(p, "elite_window"))
    return {{"elite_count", "must not exceed elite_window (" + std::to_string(param_int(p, "elite_window")) + ")"}};
  return {};
}

std::unique_ptr<Algorithm> create(const Params& p) {
  PostOptions o;
  o.ppo = ppo_settings(p);
  o.elite_window = param_int(p, "elite_window");
  o.elite_count = param_int(p, "elite_count");
  o.cross_entropy_weight = param_float(p, "cross_entropy_weight");
  return std::make_unique<Post>(o);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
