#include "metis_placer.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "metis";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: METIS k-way min-cut of the group graph, one part per device";
  i.hyperparameters = {
      {"gpus_only", true, "partition over CUDA devices only when the job has any (as in the papers)", std::nullopt, std::nullopt, {}},
      {"imbalance", 0.03, "allowed load imbalance between devices (METIS ubvec - 1)", 0.001, 10.0, {}},
      {"seed", int64_t{1}, "METIS random seed", 0.0, 2147483647.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<MetisPlacer>(param_bool(p, "gpus_only"), param_float(p, "imbalance"), param_int(p, "seed"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
