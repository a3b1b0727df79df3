#include "placement/plugin_export.h"
#include "random_search.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "random_search";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary = "Random search: independent samples from the untrained placer, best one kept";
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Algorithm> create(const Params&) { return std::make_unique<RandomSearch>(); }

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
