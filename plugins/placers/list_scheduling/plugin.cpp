#include "list_scheduling.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "list_scheduling";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: earliest-finish-time list scheduling with memory as a hard constraint (m-ETF)";
  i.hyperparameters = {
      {"optimizer_state_factor", 2.0, "optimizer bytes per parameter byte in the memory need (Adam: 2)", 0.0, 16.0, {}},
      {"headroom", 0.1, "fraction of each device's memory kept free", 0.0, 0.9, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<ListSchedulingPlacer>(param_float(p, "optimizer_state_factor"), param_float(p, "headroom"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
