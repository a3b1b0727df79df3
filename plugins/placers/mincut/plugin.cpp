#include "mincut_placer.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<MincutOptions>& params() {
  using O = MincutOptions;
  static const auto table =
      ParamTable<O>()
          .add("imbalance", &O::imbalance, "allowed load imbalance between GPUs", {0.001, 10.0})
          .add("seed", &O::seed, "Scotch random seed", {0, 2147483647});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "mincut";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: Scotch balanced min-cut of the group graph over the GPUs only";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<MincutPlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
