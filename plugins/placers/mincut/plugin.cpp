#include "mincut_placer.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "mincut";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: Scotch balanced min-cut of the group graph over the GPUs only";
  i.hyperparameters = {
      {"imbalance", 0.05, "allowed load imbalance between GPUs", 0.001, 10.0, {}},
      {"seed", int64_t{1}, "Scotch random seed", 0.0, 2147483647.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<MincutPlacer>(param_float(p, "imbalance"), param_int(p, "seed"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
