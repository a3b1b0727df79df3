#include "metis_grouper.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<MetisGrouperOptions>& params() {
  using O = MetisGrouperOptions;
  static const auto table =
      ParamTable<O>()
          .add("groups", &O::groups, "number of groups (at most one per 4 ops; HP/EAGLE: <= 256)",
               {1, 100000})
          .add("imbalance", &O::imbalance,
               "allowed load imbalance between groups (METIS ubvec - 1)", {0.001, 10.0})
          .add("seed", &O::seed, "METIS random seed", {0, 2147483647});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "metis";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "EAGLE: METIS k-way min-cut on the byte-weighted op graph";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<MetisGrouper>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
