#include "colocation.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<ColocationOptions>& params() {
  using O = ColocationOptions;
  static const auto table = ParamTable<O>().add(
      "max_group_ops", &O::max_group_ops,
      "largest group a merge may create; 0 = no limit (the paper)", {0, std::nullopt});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "colocation";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "ColocRL: merge each op into its only consumer until fixpoint";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<ColocationGrouper>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
