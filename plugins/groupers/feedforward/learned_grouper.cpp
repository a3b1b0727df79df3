#include "learned_grouper.h"

#include <algorithm>
#include <mutex>

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "hp_features.h"
#include "policy_network.h"

namespace placement::plugins {

namespace {

// HP §2: [op-kind embedding ‖ output shapes ‖ neighbours] → ReLU(64) → ReLU(64) → G logits.
class GrouperNetwork : public PolicyNetwork {
 public:
  GrouperNetwork(int64_t kinds, int64_t embedding, int64_t numeric, int64_t hidden, int64_t groups)
      : kind_(register_module("kind_embedding", torch::nn::Embedding(kinds, embedding))),
        in_(register_module("input_layer", torch::nn::Linear(embedding + numeric, hidden))),
        mid_(register_module("hidden_layer", torch::nn::Linear(hidden, hidden))),
        out_(register_module("out", torch::nn::Linear(hidden, groups))) {}

  torch::Tensor logits(const PolicyInputs& inputs, const std::vector<Action>&) override {
    torch::Tensor h = torch::cat({kind_(inputs.kinds), inputs.features}, 1);
    h = torch::relu(in_(h));
    h = torch::relu(mid_(h));
    return out_(h).unsqueeze(0);
  }

 private:
  torch::nn::Embedding kind_;
  torch::nn::Linear in_, mid_, out_;
};

}  // namespace

struct LearnedGrouper::State {
  std::string fingerprint;
  int64_t groups = 0;
  std::unique_ptr<TorchPolicy> policy;
};

LearnedGrouper::LearnedGrouper(const LearnedGrouperOptions& options)
    : options_(options), state_(std::make_unique<State>()) {}

LearnedGrouper::~LearnedGrouper() = default;

Grouping LearnedGrouper::group(const OpGraph& graph, const DeviceSet&, std::mt19937_64& rng) {
  if (graph.ops.empty()) return Grouping{{}, 1};
  const std::string fingerprint = graph.fingerprint();
  if (!state_->policy || state_->fingerprint != fingerprint) {
    const OpFeatures ops = op_features(graph, static_cast<int>(options_.policy.vocabulary));
    const int64_t n = ops.num_ops();
    const int64_t G = std::min<int64_t>(options_.groups, n);
    PolicyInputs inputs;
    inputs.features = torch::from_blob(const_cast<float*>(ops.numeric.data()),
                                       {n, OpFeatures::kNumericWidth}, torch::kFloat32)
                          .clone();
    std::vector<int64_t> kinds(ops.kind.begin(), ops.kind.end());
    inputs.kinds = torch::tensor(kinds, torch::kInt64);
    inputs.choices = G;
    std::shared_ptr<PolicyNetwork> network;
    {
      std::lock_guard<std::mutex> lock(torch_init_mutex());
      torch::manual_seed(rng());
      network = std::make_shared<GrouperNetwork>(ops.vocabulary_size(), options_.embedding,
                                                 OpFeatures::kNumericWidth, options_.hidden, G);
    }
    if (state_->policy)
      state_->policy->reset(std::move(network));
    else
      state_->policy = std::make_unique<TorchPolicy>(std::move(network), options_.policy.shaping);
    state_->policy->set_inputs(std::move(inputs), torch::Tensor());
    state_->fingerprint = fingerprint;
    state_->groups = G;
  }
  Grouping grouping;
  grouping.group_of_op = state_->policy->sample(rng);
  grouping.num_groups = static_cast<int>(state_->groups);
  return grouping;
}

TrainablePolicy* LearnedGrouper::policy() { return state_->policy.get(); }

}  // namespace placement::plugins
