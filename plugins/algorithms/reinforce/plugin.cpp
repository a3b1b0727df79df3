#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "reinforce.h"

namespace placement::plugins {
namespace {

const ParamTable<ReinforceOptions>& params() {
  using O = ReinforceOptions;
  static const auto table =
      ParamTable<O>()
          .add("learning_rate", &O::learning_rate, "Adam learning rate", {0.0, 10.0})
          .add("clip_norm", &O::clip_norm, "clip the gradient's L2 norm; 0 = off",
               {0.0, std::nullopt})
          .add("baseline_decay", &O::baseline_decay, "EMA decay of the reward baseline",
               {0.0, 0.9999})
          .add("samples_per_update", &O::samples_per_update,
               "samples per policy update (HP: k = 4)", {1, 4096})
          .add("valid_only_after", &O::valid_only_after,
               "after this many samples, invalid ones are not learned from", {0, std::nullopt})
          .add("entropy_weight", &O::entropy_weight, "weight of the policy entropy bonus",
               {0.0, 10.0});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "reinforce";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "REINFORCE with an EMA baseline (ColocRL, Hierarchical Planner)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params& p) {
  return std::make_unique<Reinforce>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
