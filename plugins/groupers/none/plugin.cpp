#include "none.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "none";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "no grouping: each op is its own group";
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Grouper> create(const Params&) { return std::make_unique<NoGrouper>(); }

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
