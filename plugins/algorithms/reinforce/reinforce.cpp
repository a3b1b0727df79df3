#include "reinforce.h"

namespace placement::plugins {

void Reinforce::reset(const AlgorithmContext& context) {
  context_ = context;
  stats_ = AlgorithmStats{};
  stats_.baseline = context.failing_reward;
  actions_.clear();
  rewards_.clear();
}

void Reinforce::observe(const Action& action, double reward, bool valid) {
  ++stats_.samples;
  if (!valid && stats_.samples > static_cast<uint64_t>(options_.valid_only_after)) return;
  actions_.push_back(action);
  rewards_.push_back(reward);
  if (static_cast<int64_t>(actions_.size()) < options_.samples_per_update) return;

  // Advantages use the baseline from before this batch; the baseline then absorbs the batch.
  const double k = static_cast<double>(actions_.size());
  std::vector<double> weights;
  weights.reserve(rewards_.size());
  for (double r : rewards_) weights.push_back((r - stats_.baseline) / k);
  if (context_.policy) {
    context_.policy->accumulate_gradient(actions_, weights, options_.entropy_weight);
    context_.policy->apply_gradient({options_.learning_rate, options_.clip_norm});
    ++stats_.updates;
  }
  for (double r : rewards_)
    stats_.baseline =
        options_.baseline_decay * stats_.baseline + (1.0 - options_.baseline_decay) * r;
  actions_.clear();
  rewards_.clear();
}

}  // namespace placement::plugins
