#include "fluid_grouper.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<FluidOptions>& params() {
  using O = FluidOptions;
  static const auto table =
      ParamTable<O>()
          .add("groups", &O::groups, "number of communities (HP/EAGLE: <= 256; at most one per op)",
               {1, 100000})
          .add("max_iterations", &O::max_iterations,
               "sweeps over all ops before stopping (networkx's default)", {1, 100000})
          .add("seed", &O::seed, "random seed of the initial ops and visiting order",
               {0, 2147483647});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "fluid";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "EAGLE: asynchronous fluid communities on the op graph";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<FluidGrouper>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
