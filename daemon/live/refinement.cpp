#include "live/refinement.h"

#include <algorithm>

namespace placementd {

int64_t long_trial_share(int64_t left, int64_t shortest, int64_t waiting) {
  const int64_t shares = std::min(waiting, left / std::max<int64_t>(shortest, 1));
  return shares > 0 ? left / shares : 0;
}

void Refinement::begin(bool applies, std::vector<Contender> contenders, uint64_t step) {
  began_ = true;
  if (!applies) return;
  applied_ = true;
  contenders_ = std::move(contenders);
  from_step_ = step;
}

std::optional<Refinement::Contender> Refinement::next_contender() {
  if (contenders_.empty()) return std::nullopt;
  const Contender next = contenders_.front();
  contenders_.erase(contenders_.begin());
  return next;
}

double Refinement::long_trial_cap(uint64_t job_steps, double used) const {
  const auto expected = static_cast<double>(expected_steps_);
  const auto steps = static_cast<double>(job_steps);
  return std::min({fraction_ * expected - used, 0.5 * (expected - steps), kMostSteps});
}

int64_t Refinement::steps_left(uint64_t job_steps, int64_t shortest) const {
  const double used = static_cast<double>(job_steps - from_step_);
  const double cap = long_trial_cap(job_steps, used);
  return cap > static_cast<double>(shortest) ? static_cast<int64_t>(cap) : 0;
}

int64_t Refinement::share(uint64_t job_steps, int64_t shortest) const {
  return long_trial_share(steps_left(job_steps, shortest), shortest,
                          1 + static_cast<int64_t>(contenders_.size()));
}

}  // namespace placementd
