#include "live/exploration_budget.h"

#include <algorithm>

namespace placementd {

void ExplorationBudget::set_reference(const std::vector<double>& step_times) {
  if (step_times.empty()) return;
  const size_t n = std::min(step_times.size(), kReferenceSteps);
  double sum = 0.0;
  for (auto it = step_times.end() - static_cast<std::ptrdiff_t>(n); it != step_times.end(); ++it)
    sum += *it;
  reference_ = sum / static_cast<double>(n);
}

std::optional<double> ExplorationBudget::cost_of(double step_time_s) const {
  if (!reference_) return std::nullopt;
  return step_time_s - *reference_;
}

std::optional<double> ExplorationBudget::expected_allowance() const {
  if (expected_steps_ == 0 || !reference_) return std::nullopt;
  return fraction_ * static_cast<double>(expected_steps_) * *reference_;
}

bool ExplorationBudget::spent(double cost_s) const {
  const std::optional<double> allowance = expected_allowance();
  return allowance && cost_s >= *allowance;
}

bool ExplorationBudget::over_pace(size_t candidates, double cost_s, double measured_s) const {
  return expected_steps_ == 0 && candidates >= kCandidatesBeforePacing &&
         cost_s > paced_allowance(measured_s);
}

bool ExplorationBudget::may_resume(double cost_s, double measured_s) const {
  return cost_s <= kResumeAtFractionOfAllowance * paced_allowance(measured_s);
}

double ExplorationBudget::used(double cost_s, double measured_s) const {
  if (fraction_ <= 0) return 0.0;
  if (expected_steps_ > 0) {
    const std::optional<double> allowance = expected_allowance();
    return allowance ? cost_s / *allowance : 0.0;
  }
  return measured_s > 0 ? cost_s / paced_allowance(measured_s) : 0.0;
}

}  // namespace placementd
