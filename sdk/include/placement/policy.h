#pragma once
// The trainable side of a stochastic grouper or placer, as the learning algorithms see it.
// Torch-free on purpose: algorithms only need log-probabilities and a weighted gradient, so they
// build and test without LibTorch, and no LibTorch type crosses a plugin boundary.

#include <string>
#include <vector>

namespace placement {

/// One sampled decision of a policy (e.g. a device index per group). Opaque to algorithms.
using Action = std::vector<int>;

struct OptimizerSettings {
  double learning_rate = 0.1;
  /// Clip the gradient's global L2 norm to this value; 0 disables clipping.
  double clip_norm = 1.0;
};

/// A parametric distribution over actions. Not thread-safe: one session drives it at a time.
class TrainablePolicy {
 public:
  virtual ~TrainablePolicy();

  /// log π(action) under the current parameters.
  virtual double log_prob(const Action& action) = 0;
  /// log π(a) for several actions. The default calls log_prob() for each; policies that can score
  /// a batch in one pass (teacher-forced decoders) override it.
  virtual std::vector<double> log_probs(const std::vector<Action>& actions);

  /// Adds ∇θ [ Σᵢ weights[i] · log π(actions[i]) + entropy_weight · H(π) ] to the gradient buffer.
  /// Every policy-gradient method here is such a weighted sum: REINFORCE weighs by the advantage,
  /// PPO by advantage × ratio where unclipped, cross-entropy on elites by a constant.
  virtual void accumulate_gradient(const std::vector<Action>& actions,
                                   const std::vector<double>& weights, double entropy_weight) = 0;

  /// Takes one optimiser step *up* the accumulated gradient, then clears the buffer.
  virtual void apply_gradient(const OptimizerSettings& settings) = 0;

  /// Parameters and optimiser state, for persistence across runs.
  virtual std::string save_state() const = 0;
  /// Restores save_state(), all or nothing: throws std::invalid_argument if it does not fit this
  /// policy (another version's, a damaged file), leaving the policy as it was.
  virtual void load_state(const std::string& state) = 0;
};

}  // namespace placement
