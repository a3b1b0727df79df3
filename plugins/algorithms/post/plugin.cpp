#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "post.h"

namespace placement::plugins {
namespace {

const ParamTable<PostOptions>& params() {
  using O = PostOptions;
  static const auto table =
      ParamTable<O>()
          .include(ppo_params(), &O::ppo)
          .add("elite_window", &O::elite_window, "samples between cross-entropy steps", {1, 100000})
          .add("elite_count", &O::elite_count, "best valid samples of a window to imitate",
               {1, 100000})
          .add("cross_entropy_weight", &O::cross_entropy_weight, "scale of the cross-entropy step",
               {0.0, 100.0});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "post";
  i.kind = PluginKind::kAlgorithm;
  i.version = "1.0.0";
  i.summary =
      "Post: PPO plus cross-entropy minimisation on elite placements (Gao et al., NeurIPS'18)";
  i.hyperparameters = params().declared();
  return i;
}

std::vector<ParamError> validate(const Params& p) {
  const PostOptions o = params().read(p);
  if (o.elite_count > o.elite_window)
    return {
        {"elite_count", "must not exceed elite_window (" + std::to_string(o.elite_window) + ")"}};
  return {};
}

std::unique_ptr<Algorithm> create(const Params& p) {
  return std::make_unique<Post>(params().read(p));
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(algorithm, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
