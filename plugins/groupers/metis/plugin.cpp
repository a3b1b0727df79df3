#include "metis_grouper.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "metis";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "EAGLE: METIS k-way min-cut on the byte-weighted op graph";
  i.hyperparameters = {
      {"groups", int64_t{256}, "number of groups (at most one per 4 ops; HP/EAGLE: <= 256)", 1.0, 100000.0, {}},
      {"imbalance", 0.03, "allowed load imbalance between groups (METIS ubvec - 1)", 0.001, 10.0, {}},
      {"seed", int64_t{1}, "METIS random seed", 0.0, 2147483647.0, {}},
  };
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<MetisGrouper>(param_int(p, "groups"), param_float(p, "imbalance"), param_int(p, "seed"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
