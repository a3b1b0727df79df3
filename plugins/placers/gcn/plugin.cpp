#include "gcn_network.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<LearnedPlacerOptions>& params() {
  static const auto table = learned_placer_params("hidden units of both graph convolutions");
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "gcn";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "Learned GCN placer: two graph convolutions over the group graph (EAGLE)";
  i.hyperparameters = params().declared();
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Placer> create(const Params& p) {
  const LearnedPlacerOptions o = params().read(p);
  return std::make_unique<LearnedPlacer>("gcn", gcn_network(o.hidden), o.policy);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
