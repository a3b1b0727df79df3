#include "expert.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "expert";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "baseline: layer i on device i, embedding with the first layer, softmax with the last";
  i.hyperparameters = {{"gpus_only", true, "use only CUDA devices when the job has any (as in the papers)",
                        std::nullopt, std::nullopt, {}}};
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) { return std::make_unique<ExpertPlacer>(param_bool(p, "gpus_only")); }

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
