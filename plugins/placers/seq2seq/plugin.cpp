#include "placement/param_table.h"
#include "placement/plugin_export.h"
#include "seq2seq_network.h"

namespace placement::plugins {
namespace {

struct Seq2seqPlacerOptions {
  LearnedPolicyOptions policy;
  int64_t hidden = 256;
  int64_t device_embedding = 32;
  AttentionPosition attention = AttentionPosition::kAfter;
};

const ParamTable<Seq2seqPlacerOptions>& params() {
  using O = Seq2seqPlacerOptions;
  static const auto table =
      ParamTable<O>()
          .include(learned_policy_params(), &O::policy)
          .add("hidden", &O::hidden, "LSTM hidden units (HP/EAGLE: 256 or 512)", {2, 8192})
          .add("device_embedding", &O::device_embedding,
               "size of the previous-device embedding fed to the decoder", {1, 4096})
          .add("attention", &O::attention,
               "content-based attention before the decoder (EAGLE) or after it (HP)",
               {{"before", AttentionPosition::kBefore}, {"after", AttentionPosition::kAfter}});
  return table;
}

PluginInfo info() {
  PluginInfo i;
  i.name = "seq2seq";
  i.kind = PluginKind::kPlacer;
  i.version = "1.0.0";
  i.summary =
      "Learned seq2seq placer: bi-LSTM encoder, LSTM decoder, attention before (EAGLE) or after "
      "(HP)";
  i.hyperparameters = params().declared();
  i.torch_version = linked_torch_version();
  return i;
}

std::vector<ParamError> validate(const Params& p) {
  if (params().read(p).hidden % 2 != 0)
    return {{"hidden", "must be even (the encoder has two directions)"}};
  return {};
}

std::unique_ptr<Placer> create(const Params& p) {
  const Seq2seqPlacerOptions o = params().read(p);
  return std::make_unique<LearnedPlacer>(
      "seq2seq", seq2seq_network(o.hidden, o.device_embedding, o.attention), o.policy);
}

}  // namespace
}  // namespace placement::plugins

PLACEMENT_EXPORT_PLUGIN(placer, placement::plugins::info, placement::plugins::validate,
                        placement::plugins::create)
