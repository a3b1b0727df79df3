#include "placement/plugin_export.h"
#include "scotch_placer.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "scotch";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: Scotch static mapping of the group graph onto the device topology (speeds and links)";
  i.hyperparameters = {
      {"gpus_only", false, "map onto CUDA devices only when the job has any (the HP paper's Scotch uses all)", std::nullopt,
       std::nullopt, {}},
      {"imbalance", 0.05, "allowed load imbalance relative to each device's share", 0.001, 10.0, {}},
      {"seed", int64_t{1}, "Scotch random seed", 0.0, 2147483647.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<ScotchPlacer>(param_bool(p, "gpus_only"), param_float(p, "imbalance"), param_int(p, "seed"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
