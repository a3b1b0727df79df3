#include "learned_grouper.h"
#include "placement/param_table.h"
#include "placement/plugin_export.h"

namespace placement::plugins {
namespace {

const ParamTable<LearnedGrouperOptions>& params() {
  using O = LearnedGrouperOptions;
  static const auto table =
      ParamTable<O>()
          .include(learned_policy_params(), &O::policy)
          .add("groups", &O::groups, "G, the number of groups (HP: 256; at most one per op)",
               {1, 100000})
          .add("hidden", &O::hidden, "hidden units of both layers (HP: 64)", {1, 8192})
          .add("embedding", &O::embedding, "size of the learned op-kind embedding (HP: 20)",
               {1, 1024});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "feedforward";
  i.kind = PluginKind::kGrouper;
  i.version = "1.0.0";
  i.summary =
      "Hierarchical Planner: learned feed-forward grouper (softmax over G groups per op), trained "
      "with the placer";
  i.hyperparameters = params().declared();
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params&) { return {}; }

std::unique_ptr<Grouper> create(const Params& p) {
  return std::make_unique<LearnedGrouper>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(grouper, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
