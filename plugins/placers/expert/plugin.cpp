#include "expert.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<ExpertOptions>& params() {
  using O = ExpertOptions;
  static const auto table = ParamTable<O>().add(
      "gpus_only", &O::gpus_only, "use only CUDA devices when the job has any (as in the papers)");
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "expert";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary =
      "baseline: layer i on device i, embedding with the first layer, softmax with the last";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }
std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<ExpertPlacer>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
