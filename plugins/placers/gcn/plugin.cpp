#include "gcn_network.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "gcn";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary = "Learned GCN placer: two graph convolutions over the group graph (EAGLE)";
  i.hyperparameters = learned_placer_hyperparameters();
  i.hyperparameters.push_back({"hidden", int64_t{64}, "hidden units of both graph convolutions", 1.0, 8192.0, {}});
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Placer> create(const Params& p) {
  return std::make_unique<LearnedPlacer>("gcn", gcn_network(param_int(p, "hidden")), logit_shaping(p),
                                         static_cast<int>(param_int(p, "vocabulary")));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate, placement::plugins::create)
