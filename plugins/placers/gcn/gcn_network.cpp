#include "gcn_network.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>

#include "policy_network.h"

namespace placement::plugins {

namespace {

class GcnNetwork : public PolicyNetwork {
 public:
  GcnNetwork(int64_t width, int64_t hidden, int64_t devices)
      : first_(register_module("first", torch::nn::Linear(width, hidden))),
        second_(register_module("second", torch::nn::Linear(hidden, hidden))),
        out_(register_module("out", torch::nn::Linear(hidden, devices))) {}

  torch::Tensor logits(const PolicyInputs& inputs, const std::vector<Action>&) override {
    if (!propagation_.defined() || propagation_.size(0) != inputs.adjacency.size(0) ||
        !adjacency_.is_same(inputs.adjacency)) {
      // Â = D⁻¹(A_sym + I): symmetric traffic plus self loops, each row averaging its neighbours.
      const torch::Tensor a = (inputs.adjacency + inputs.adjacency.t()) / 2 +
                              torch::eye(inputs.adjacency.size(0), inputs.adjacency.options());
      propagation_ = a / a.sum(1, true);
      adjacency_ = inputs.adjacency;
    }
    torch::Tensor h = torch::relu(first_(propagation_.matmul(inputs.features)));
    h = torch::relu(second_(propagation_.matmul(h)));
    return out_(h).unsqueeze(0);
  }

 private:
  torch::nn::Linear first_, second_, out_;
  torch::Tensor adjacency_, propagation_;
};

}  // namespace

NetworkFactory gcn_network(int64_t hidden) {
  return [hidden](int64_t width, int64_t, int64_t devices) {
    return std::make_shared<GcnNetwork>(width, hidden, devices);
  };
}

}  // namespace placement::plugins
