#include "feedforward_network.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<LearnedPlacerOptions>& params() {
  static const auto table = learned_placer_params("hidden units of both layers");
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "feedforward";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary =
      "Learned feed-forward placer over HP group embeddings (Hierarchical Planner's Simple "
      "Planner)";
  i.hyperparameters = params().declared();
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Placer> create(const Params& p) {
  const LearnedPlacerOptions o = params().read(p);
  return std::make_unique<LearnedPlacer>("feedforward", feedforward_network(o.hidden), o.policy);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
