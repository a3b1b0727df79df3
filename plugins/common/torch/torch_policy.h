#pragma once
// TrainablePolicy over a LibTorch PolicyNetwork, and the placer built on it. Torch-free header:
// the network is only forward-declared, so plugin.cpp files compile without LibTorch headers.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "placement/param_table.h"
#include "placement/placer.h"
#include "placement/policy.h"

namespace placement::plugins {

class PolicyNetwork;

/// How raw network outputs become a distribution (Hierarchical Planner / EAGLE): logits are
/// C·tanh(l / T), and for the first `noise_samples` draws Gaussian noise of `noise_std` is added
/// before sampling (exploration only; log π is always the noise-free policy's).
struct LogitShaping {
  double tanh_constant = 5.0;
  double temperature = 10.0;
  double noise_std = 0.5;
  int64_t noise_samples = 100;
};

/// What every learned grouper and placer is configured with besides its network.
struct LearnedPolicyOptions {
  LogitShaping shaping;
  /// Op kinds with their own entry in the op features (op_features()); the rest share "other".
  int64_t vocabulary = 32;
};

/// The hyperparameters every learned grouper and placer shares, first in each one's table:
/// tanh_constant, temperature, logit_noise, noise_samples, vocabulary.
const ParamTable<LearnedPolicyOptions>& learned_policy_params();

/// A learned placer whose network has one size, `hidden` (feedforward, gcn).
struct LearnedPlacerOptions {
  LearnedPolicyOptions policy;
  int64_t hidden = 64;
};
/// Its table: learned_policy_params(), then `hidden`, which `hidden_summary` describes.
ParamTable<LearnedPlacerOptions> learned_placer_params(std::string hidden_summary);

/// The LibTorch version the learned plugins were built against (PluginInfo::torch_version).
const char* linked_torch_version();

/// Serialises network construction: LibTorch initialises parameters from its global generator,
/// which is seeded from the placer's rng under this lock so that seeded runs are reproducible.
std::mutex& torch_init_mutex();

/// Builds a network for [positions × width] inputs with `choices` per position.
using NetworkFactory = std::function<std::shared_ptr<PolicyNetwork>(
    int64_t width, int64_t positions, int64_t choices)>;

/// A placer whose decisions come from a learned network over the HP §2 group features. The
/// network is kept across prepare() calls while the problem's sizes stay the same (a regrouped
/// graph keeps what was learned) and rebuilt otherwise.
class LearnedPlacer : public Placer {
 public:
  LearnedPlacer(std::string name, NetworkFactory factory, const LearnedPolicyOptions& options);
  ~LearnedPlacer() override;

  void prepare(const OpGraph& graph, const Grouping& grouping, const DeviceSet& devices,
               std::mt19937_64& rng) override;
  std::vector<int> place(std::mt19937_64& rng) override;
  TrainablePolicy* policy() override;

 private:
  struct State;
  std::string name_;
  NetworkFactory factory_;
  LearnedPolicyOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace placement::plugins
