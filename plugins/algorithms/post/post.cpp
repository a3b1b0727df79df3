#include "post.h"

#include <algorithm>

namespace placement::plugins {

void Post::on_sample(const Action& action, double reward, bool valid) {
  if (valid) window_.emplace_back(reward, action);
  if (++window_samples_ < options_.elite_window) return;
  const size_t keep = std::min(window_.size(), static_cast<size_t>(options_.elite_count));
  std::partial_sort(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(keep),
                    window_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Action> elites;
  for (size_t i = 0; i < keep; ++i) elites.push_back(window_[i].second);
  if (context().policy && !elites.empty()) {
    cross_entropy_step(*context().policy, elites, options_.cross_entropy_weight,
                       {options_.ppo.learning_rate, options_.ppo.clip_norm});
    ++cross_entropy_steps_;
  }
  window_.clear();
  window_samples_ = 0;
}

}  // namespace placement::plugins
