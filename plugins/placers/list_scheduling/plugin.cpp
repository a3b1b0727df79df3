#include "list_scheduling.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<ListSchedulingOptions>& params() {
  using O = ListSchedulingOptions;
  static const auto table =
      ParamTable<O>()
          .add("optimizer_state_factor", &O::optimizer_state_factor,
               "optimizer bytes per parameter byte in the memory need (Adam: 2)", {0.0, 16.0})
          .add("headroom", &O::headroom, "fraction of each device's memory kept free", {0.0, 0.9});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "list_scheduling";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary =
      "baseline: earliest-finish-time list scheduling with memory as a hard constraint (m-ETF)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<ListSchedulingPlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
