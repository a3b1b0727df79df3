#include "policy_gradient.h"

#include <cmath>

namespace placement::plugins {

int ppo_clip_step(TrainablePolicy& policy, const SampleBatch& batch, double clip_epsilon,
                  double entropy_weight, const OptimizerSettings& settings) {
  const double n = static_cast<double>(batch.actions.size());
  std::vector<double> weights(batch.actions.size(), 0.0);
  int clipped = 0;
  const std::vector<double> log_probs = policy.log_probs(batch.actions);
  for (size_t i = 0; i < batch.actions.size(); ++i) {
    const double ratio = std::exp(log_probs[i] - batch.old_log_probs[i]);
    const double a = batch.advantages[i];
    if ((a > 0 && ratio > 1.0 + clip_epsilon) || (a < 0 && ratio < 1.0 - clip_epsilon)) {
      ++clipped;
      continue;
    }
    weights[i] = ratio * a / n;
  }
  policy.accumulate_gradient(batch.actions, weights, entropy_weight);
  policy.apply_gradient(settings);
  return clipped;
}

double kl_penalized_step(TrainablePolicy& policy, const SampleBatch& batch, double kl_weight,
                         double entropy_weight, const OptimizerSettings& settings) {
  const double n = static_cast<double>(batch.actions.size());
  std::vector<double> weights(batch.actions.size());
  double kl = 0.0;
  const std::vector<double> log_probs = policy.log_probs(batch.actions);
  for (size_t i = 0; i < batch.actions.size(); ++i) {
    const double log_prob = log_probs[i];
    kl += (batch.old_log_probs[i] - log_prob) / n;
    weights[i] =
        (std::exp(log_prob - batch.old_log_probs[i]) * batch.advantages[i] + kl_weight) / n;
  }
  policy.accumulate_gradient(batch.actions, weights, entropy_weight);
  policy.apply_gradient(settings);
  return kl;
}

void cross_entropy_step(TrainablePolicy& policy, const std::vector<Action>& elites, double weight,
                        const OptimizerSettings& settings) {
  if (elites.empty()) return;
  const std::vector<double> weights(elites.size(), weight / static_cast<double>(elites.size()));
  policy.accumulate_gradient(elites, weights, 0.0);
  policy.apply_gradient(settings);
}

const ParamTable<PpoSettings>& ppo_params() {
  using S = PpoSettings;
  static const auto table =
      ParamTable<S>()
          .add("clip_epsilon", &S::clip_epsilon, "PPO clipping range ε", {0.0, 1.0})
          .add("minibatch", &S::minibatch, "samples per policy iteration", {1, 4096})
          .add("epochs", &S::epochs, "ascent steps per iteration", {1, 100})
          .add("entropy_weight", &S::entropy_weight, "weight of the policy entropy bonus",
               {0.0, 10.0})
          .add("learning_rate", &S::learning_rate, "Adam learning rate", {0.0, 10.0})
          .add("clip_norm", &S::clip_norm, "clip the gradient's L2 norm; 0 = off",
               {0.0, std::nullopt})
          .add("baseline_decay", &S::baseline_decay, "EMA decay of the reward baseline",
               {0.0, 0.9999});
  return table;
}

uint64_t ppo_iteration(TrainablePolicy& policy, const SampleBatch& batch,
                       const PpoSettings& settings) {
  uint64_t clipped = 0;
  for (int64_t epoch = 0; epoch < settings.epochs; ++epoch)
    clipped += static_cast<uint64_t>(ppo_clip_step(policy, batch, settings.clip_epsilon,
                                                   settings.entropy_weight,
                                                   {settings.learning_rate, settings.clip_norm}));
  return clipped;
}

void BatchedPolicyGradient::reset(const AlgorithmContext& context) {
  context_ = context;
  baseline_ = EmaBaseline(baseline_decay_);
  samples_ = 0;
  updates_ = 0;
  batch_ = SampleBatch{};
}

void BatchedPolicyGradient::observe(const Action& action, double reward, bool valid) {
  ++samples_;
  on_sample(action, reward, valid);
  if (!context_.policy) return;
  batch_.actions.push_back(action);
  batch_.rewards.push_back(reward);
  if (static_cast<int64_t>(batch_.actions.size()) < batch_size_) return;
  // The policy has not changed since these samples were drawn: one batched pass gives log π_old.
  batch_.old_log_probs = context_.policy->log_probs(batch_.actions);

  // Advantages against the baseline from before this batch (the first batch: its own mean).
  if (!baseline_.started()) {
    double mean = 0.0;
    for (double r : batch_.rewards) mean += r / static_cast<double>(batch_.rewards.size());
    baseline_ = EmaBaseline(baseline_decay_, mean);
  }
  for (double r : batch_.rewards) batch_.advantages.push_back(r - baseline_.value());
  update(batch_);
  ++updates_;
  for (double r : batch_.rewards) baseline_.absorb(r);
  batch_ = SampleBatch{};
}

AlgorithmStats BatchedPolicyGradient::stats() const {
  AlgorithmStats s;
  s.samples = samples_;
  s.updates = updates_;
  s.baseline = baseline_.value();
  return s;
}

}  // namespace placement::plugins
