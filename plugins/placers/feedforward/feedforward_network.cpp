#include "feedforward_network.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>

#include "policy_network.h"

namespace placement::plugins {

namespace {

class FeedforwardNetwork : public PolicyNetwork {
 public:
  FeedforwardNetwork(int64_t width, int64_t hidden, int64_t devices)
      : in_(register_module("input_layer", torch::nn::Linear(width, hidden))),
        mid_(register_module("hidden_layer", torch::nn::Linear(hidden, hidden))),
        out_(register_module("out", torch::nn::Linear(hidden, devices))) {}

  torch::Tensor logits(const PolicyInputs& inputs, const std::vector<Action>&) override {
    torch::Tensor h = torch::relu(in_(inputs.features));
    h = torch::relu(mid_(h));
    return out_(h).unsqueeze(0);
  }

 private:
  torch::nn::Linear in_, mid_, out_;
};

}  // namespace

NetworkFactory feedforward_network(int64_t hidden) {
  return [hidden](int64_t width, int64_t, int64_t devices) {
    return std::make_shared<FeedforwardNetwork>(width, hidden, devices);
  };
}

}  // namespace placement::plugins
