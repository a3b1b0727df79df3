#include "name_prefix.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<NamePrefixOptions>& params() {
  using O = NamePrefixOptions;
  static const auto table = ParamTable<O>().add(
      "levels", &O::levels, "name levels that must match (Spotlight: 2)", {1, 64});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "name_prefix";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "Spotlight: ops sharing the two-level name prefix form a group";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<NamePrefixGrouper>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
