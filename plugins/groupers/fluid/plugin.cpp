#include "fluid_grouper.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "fluid";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "EAGLE: asynchronous fluid communities on the op graph";
  i.hyperparameters = {
      {"groups", int64_t{256}, "number of communities (HP/EAGLE: <= 256; at most one per op)", 1.0, 100000.0, {}},
      {"max_iterations", int64_t{100}, "sweeps over all ops before stopping (networkx's default)", 1.0, 100000.0, {}},
      {"seed", int64_t{1}, "random seed of the initial ops and visiting order", 0.0, 2147483647.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<FluidGrouper>(param_int(p, "groups"), param_int(p, "max_iterations"), param_int(p, "seed"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
