#include "name_prefix.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "name_prefix";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "Spotlight: ops sharing the two-level name prefix form a group";
  i.hyperparameters = {{"levels", int64_t{2}, "name levels that must match (Spotlight: 2)", 1.0, 64.0, {}}};
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params& p) { return std::make_unique<NamePrefixGrouper>(param_int(p, "levels")); }

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
