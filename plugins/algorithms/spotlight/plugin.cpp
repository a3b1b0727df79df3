#include "placement/plugin_export.h"
#include "spotlight.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "spotlight";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "Spotlight: KL-penalised proximal policy optimisation (Gao et al., ICML'18)";
  i.hyperparameters = {
      {"kl_weight", 1.0, "β, weight of KL(π_old ‖ π)", 0.0, 1000.0, {}},
      {"ascent_steps", int64_t{10}, "gradient ascent steps per iteration", 1.0, 1000.0, {}},
      {"samples_per_iteration", int64_t{10}, "samples per policy iteration", 1.0, 4096.0, {}},
      {"entropy_weight", 0.0, "weight of the policy entropy bonus", 0.0, 10.0, {}},
      {"learning_rate", 0.01, "Adam learning rate", 0.0, 10.0, {}},
      {"clip_norm", 1.0, "clip the gradient's L2 norm; 0 = off", 0.0, std::nullopt, {}},
      {"baseline_decay", 0.95, "EMA decay of the reward baseline", 0.0, 0.9999, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params& p) {
  SpotlightOptions o;
  o.kl_weight = param_float(p, "kl_weight");
  o.ascent_steps = param_int(p, "ascent_steps");
  o.samples_per_iteration = param_int(p, "samples_per_iteration");
  o.entropy_weight = param_float(p, "entropy_weight");
  o.learning_rate = param_float(p, "learning_rate");
  o.clip_norm = param_float(p, "clip_norm");
  o.baseline_decay = param_float(p, "baseline_decay");
  return std::make_unique<Spotlight>(o);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
