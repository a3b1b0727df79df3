#pragma once
// The LibTorch side of the learned groupers and placers. Included only by plugin sources that
// build networks; every other header of the plugins stays Torch-free.

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "placement/policy.h"
#include "torch_policy.h"

namespace torch::optim {
class Adam;
}

namespace placement::plugins {

/// What a network sees of one problem, as tensors.
struct PolicyInputs {
  /// [positions × width] float features (groups for a placer, ops for a grouper).
  torch::Tensor features;
  /// [positions] int64 op-kind index (graphs' op features; undefined for group inputs).
  torch::Tensor kinds;
  /// [positions × positions] float, row a = a's share of traffic with b (undefined when unused).
  torch::Tensor adjacency;
  /// Number of choices per position (devices, or groups for a grouper).
  int64_t choices = 0;
};

/// A network that scores the choices of every position. Autoregressive networks condition
/// position i on the choices made before it (seq2seq decoders); the others score all positions at
/// once.
class PolicyNetwork : public torch::nn::Module {
 public:
  /// Raw logits [S × positions × choices] for S actions evaluated under teacher forcing. Networks
  /// that are not autoregressive may return [1 × positions × choices] (it broadcasts).
  virtual torch::Tensor logits(const PolicyInputs& inputs, const std::vector<Action>& actions) = 0;

  /// Turns position i's raw logits (`choices` contiguous floats) into a choice: shaping, masking,
  /// noise and the random draw live in the caller, in plain C++ rather than one tensor op per row.
  using Chooser = std::function<int(const float* raw_logits, int64_t position)>;

  /// Draws one action. The default scores all positions at once; autoregressive networks override
  /// it to decode step by step.
  virtual Action sample(const PolicyInputs& inputs, const Chooser& choose);
};

/// TrainablePolicy over a PolicyNetwork: shaped, masked softmax per position; Adam on the
/// accumulated gradient of −(Σ wᵢ log π(aᵢ) + β H).
class TorchPolicy : public TrainablePolicy {
 public:
  TorchPolicy(std::shared_ptr<PolicyNetwork> network, LogitShaping shaping);
  ~TorchPolicy() override;

  /// Swaps in a new network (a problem of other sizes) with a fresh optimiser; the object, and so
  /// every pointer an algorithm holds to it, stays the same.
  void reset(std::shared_ptr<PolicyNetwork> network);

  /// The problem to score. `allowed` is [positions × choices] bool (undefined: everything allowed).
  void set_inputs(PolicyInputs inputs, torch::Tensor allowed);
  Action sample(std::mt19937_64& rng);
  PolicyNetwork& network() { return *network_; }

  double log_prob(const Action& action) override;
  std::vector<double> log_probs(const std::vector<Action>& actions) override;
  void accumulate_gradient(const std::vector<Action>& actions, const std::vector<double>& weights,
                           double entropy_weight) override;
  void apply_gradient(const OptimizerSettings& settings) override;
  /// A tensor archive (tensor_archive.h): the network's parameters and buffers, Adam's state.
  std::string save_state() const override;
  /// All or nothing: a state that does not fit (another network, a damaged file) throws
  /// std::invalid_argument and leaves the network and the optimiser as they were.
  void load_state(const std::string& state) override;

 private:
  /// log-softmax of the shaped, masked logits, [S × positions × choices].
  torch::Tensor log_distribution(const std::vector<Action>& actions);
  void check_action(const Action& action) const;

  std::shared_ptr<PolicyNetwork> network_;
  LogitShaping shaping_;
  PolicyInputs inputs_;
  torch::Tensor allowed_;
  std::vector<uint8_t> allowed_flat_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  int64_t samples_drawn_ = 0;
};

}  // namespace placement::plugins
