#pragma once
// Policy-gradient steps shared by the ppo, post and spotlight algorithms. Each one is a weighted
// sum of ∇log π(aᵢ), which is all the Torch-free TrainablePolicy boundary offers.

#include <cstdint>
#include <optional>
#include <vector>

#include "placement/algorithm.h"
#include "placement/param_table.h"
#include "placement/policy.h"

namespace placement::plugins {

/// Exponential moving average of the reward. Starts at the first value it absorbs (or at `start`
/// when given), so early advantages are not dominated by an arbitrary initial value.
class EmaBaseline {
 public:
  explicit EmaBaseline(double decay, std::optional<double> start = std::nullopt)
      : decay_(decay), value_(start) {}
  double value() const { return value_.value_or(0.0); }
  bool started() const { return value_.has_value(); }
  void absorb(double reward) {
    value_ = value_ ? decay_ * *value_ + (1.0 - decay_) * reward : reward;
  }

 private:
  double decay_;
  std::optional<double> value_;
};

/// The samples of one policy iteration, with log π_old(aᵢ) taken when they were drawn.
struct SampleBatch {
  std::vector<Action> actions;
  std::vector<double> rewards;
  std::vector<double> old_log_probs;
  std::vector<double> advantages;
};

/// One ascent step on PPO's clipped surrogate mean(min(rᵢAᵢ, clip(rᵢ, 1−ε, 1+ε)Aᵢ)) + βH, with
/// rᵢ = π(aᵢ)/π_old(aᵢ). Where the clip is active the term is constant, so its weight is 0;
/// elsewhere ∇(rᵢAᵢ) = rᵢAᵢ∇log π(aᵢ). Returns how many samples were clipped.
int ppo_clip_step(TrainablePolicy& policy, const SampleBatch& batch, double clip_epsilon,
                  double entropy_weight, const OptimizerSettings& settings);

/// One ascent step on Spotlight's penalised surrogate mean(rᵢAᵢ) − β·KL(π_old ‖ π) + γH. Because
/// the aᵢ are drawn from π_old, −∇KL(π_old ‖ π) = E_old[∇log π(a)] ≈ mean ∇log π(aᵢ), so each
/// sample weighs (rᵢAᵢ + β)/n. Returns the sample estimate of KL(π_old ‖ π) before the step.
double kl_penalized_step(TrainablePolicy& policy, const SampleBatch& batch, double kl_weight,
                         double entropy_weight, const OptimizerSettings& settings);

/// One ascent step on mean log π(eliteᵢ) (cross-entropy minimisation towards the elite samples,
/// as in Post); `weight` scales it.
void cross_entropy_step(TrainablePolicy& policy, const std::vector<Action>& elites, double weight,
                        const OptimizerSettings& settings);

/// PPO's hyperparameters, shared by the ppo and post algorithms; defaults from EAGLE §4.
struct PpoSettings {
  double clip_epsilon = 0.3;
  int64_t minibatch = 10;
  int64_t epochs = 4;
  double entropy_weight = 0.01;
  double learning_rate = 0.01;  // Adam
  double clip_norm = 1.0;
  double baseline_decay = 0.95;
};
/// PPO's hyperparameters, one row per member of PpoSettings.
const ParamTable<PpoSettings>& ppo_params();
/// The epochs of one PPO iteration; returns how many samples hit the clip over all of them.
uint64_t ppo_iteration(TrainablePolicy& policy, const SampleBatch& batch,
                       const PpoSettings& settings);

/// Collects `batch_size` samples with log π_old and EMA-baseline advantages, then hands the batch
/// to update(). log π_old is read when the batch is full: the policy only changes inside update(),
/// so every sample of a batch was drawn from the parameters it has then.
class BatchedPolicyGradient : public Algorithm {
 public:
  BatchedPolicyGradient(int64_t batch_size, double baseline_decay)
      : batch_size_(batch_size), baseline_decay_(baseline_decay), baseline_(baseline_decay) {}

  void reset(const AlgorithmContext& context) override;
  void observe(const Action& action, double reward, bool valid) override;
  AlgorithmStats stats() const override;

 protected:
  /// Called with a full batch; context().policy is non-null.
  virtual void update(const SampleBatch& batch) = 0;
  /// Sees every sample, also without a policy (for bookkeeping such as elites).
  virtual void on_sample(const Action& /*action*/, double /*reward*/, bool /*valid*/) {}
  const AlgorithmContext& context() const { return context_; }
  uint64_t updates_ = 0;

 private:
  int64_t batch_size_;
  double baseline_decay_;
  AlgorithmContext context_;
  EmaBaseline baseline_;
  uint64_t samples_ = 0;
  SampleBatch batch_;
};

}  // namespace placement::plugins
