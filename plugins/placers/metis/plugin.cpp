#include "metis_placer.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<MetisPlacerOptions>& params() {
  using O = MetisPlacerOptions;
  static const auto table =
      ParamTable<O>()
          .add("gpus_only", &O::gpus_only,
               "partition over CUDA devices only when the job has any (as in the papers)")
          .add("imbalance", &O::imbalance,
               "allowed load imbalance between devices (METIS ubvec - 1)", {0.001, 10.0})
          .add("seed", &O::seed, "METIS random seed", {0, 2147483647});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "metis";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: METIS k-way min-cut of the group graph, one part per device";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<MetisPlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
