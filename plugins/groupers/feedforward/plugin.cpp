#include "learned_grouper.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

PluginInfo info() {
  PluginInfo i;
  i.name = "feedforward";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary = "Hierarchical Planner: learned feed-forward grouper (softmax over G groups per op), trained with the placer";
  i.hyperparameters = learned_placer_hyperparameters();
  i.hyperparameters.push_back({"groups", int64_t{256}, "G, the number of groups (HP: 256; at most one per op)", 1.0,
                               100000.0, {}});
  i.hyperparameters.push_back({"hidden", int64_t{64}, "hidden units of both layers (HP: 64)", 1.0, 8192.0, {}});
  i.hyperparameters.push_back({"embedding", int64_t{20}, "size of the learned op-kind embedding (HP: 20)", 1.0, 1024.0, {}});
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<LearnedGrouper>(param_int(p, "groups"), param_int(p, "hidden"), param_int(p, "embedding"),
                                          static_cast<int>(param_int(p, "vocabulary")), logit_shaping(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate, placement::plugins::create)
