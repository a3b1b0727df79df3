#include "colocation.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "colocation";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "ColocRL: merge each op into its only consumer until fixpoint";
  i.hyperparameters = {{"max_group_ops", int64_t{0},
                        "largest group a merge may create; 0 = no limit (the paper)", 0.0, std::nullopt, {}}};
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Grouper> create(const Params& params) {
  return std::make_unique<ColocationGrouper>(param_int(params, "max_group_ops"));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
