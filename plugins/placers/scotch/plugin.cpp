#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "scotch_placer.h"

namespace placement::plugins {
namespace {

const ParamTable<ScotchPlacerOptions>& params() {
  using O = ScotchPlacerOptions;
  static const auto table =
      ParamTable<O>()
          .add("gpus_only", &O::gpus_only,
               "map onto CUDA devices only when the job has any (the HP paper's Scotch uses all)")
          .add("imbalance", &O::imbalance, "allowed load imbalance relative to each device's share",
               {0.001, 10.0})
          .add("seed", &O::seed, "Scotch random seed", {0, 2147483647});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "scotch";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary =
      "baseline: Scotch static mapping of the group graph onto the device topology (speeds and "
      "links)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<ScotchPlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
