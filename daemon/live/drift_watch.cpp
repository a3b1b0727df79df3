#include "live/drift_watch.h"

#include <algorithm>
#include <utility>

#include "live/median.h"

namespace placementd {

void DriftWatch::observe(double step_time_s, bool measured, bool counts) {
  if (!reference_ && measured) {
    baseline_.push_back(step_time_s);
    if (static_cast<int64_t>(baseline_.size()) >= std::max(steps_, kBaselineSteps)) {
      reference_ = median_of(std::move(baseline_));
      baseline_.clear();
    }
  }
  if (counts && reference_ && step_time_s > *reference_ * (1.0 + threshold_))
    ++slow_run_;
  else
    slow_run_ = 0;
}

void DriftWatch::restart() {
  slow_run_ = 0;
  reference_.reset();
  baseline_.clear();
}

void DriftWatch::set_reference(std::optional<double> median) {
  reference_ = median;
  baseline_.clear();
}

}  // namespace placementd
