#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "spotlight.h"

namespace placement::plugins {
namespace {

const ParamTable<SpotlightOptions>& params() {
  using O = SpotlightOptions;
  static const auto table =
      ParamTable<O>()
          .add("kl_weight", &O::kl_weight, "β, weight of KL(π_old ‖ π)", {0.0, 1000.0})
          .add("ascent_steps", &O::ascent_steps, "gradient ascent steps per iteration", {1, 1000})
          .add("samples_per_iteration", &O::samples_per_iteration, "samples per policy iteration",
               {1, 4096})
          .add("entropy_weight", &O::entropy_weight, "weight of the policy entropy bonus",
               {0.0, 10.0})
          .add("learning_rate", &O::learning_rate, "Adam learning rate", {0.0, 10.0})
          .add("clip_norm", &O::clip_norm, "clip the gradient's L2 norm; 0 = off",
               {0.0, std::nullopt})
          .add("baseline_decay", &O::baseline_decay, "EMA decay of the reward baseline",
               {0.0, 0.9999});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "spotlight";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "Spotlight: KL-penalised proximal policy optimisation (Gao et al., ICML'18)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params& p) {
  return std::make_unique<Spotlight>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
