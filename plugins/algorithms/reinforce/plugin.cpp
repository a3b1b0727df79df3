#include "placement/plugin_export.h"
#include "reinforce.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "reinforce";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "REINFORCE with an EMA baseline (ColocRL, Hierarchical Planner)";
  i.hyperparameters = {
      {"learning_rate", 0.1, "Adam learning rate", 0.0, 10.0, {}},
      {"clip_norm", 1.0, "clip the gradient's L2 norm; 0 = off", 0.0, std::nullopt, {}},
      {"baseline_decay", 0.95, "EMA decay of the reward baseline", 0.0, 0.9999, {}},
      {"samples_per_update", int64_t{4}, "samples per policy update (HP: k = 4)", 1.0, 4096.0, {}},
      {"valid_only_after", int64_t{500}, "after this many samples, invalid ones are not learned from", 0.0, std::nullopt, {}},
      {"entropy_weight", 0.0, "weight of the policy entropy bonus", 0.0, 10.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params& p) {
  ReinforceOptions o;
  o.learning_rate = param_float(p, "learning_rate");
  o.clip_norm = param_float(p, "clip_norm");
  o.baseline_decay = param_float(p, "baseline_decay");
  o.samples_per_update = param_int(p, "samples_per_update");
  o.valid_only_after = param_int(p, "valid_only_after");
  o.entropy_weight = param_float(p, "entropy_weight");
  return std::make_unique<Reinforce>(o);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
