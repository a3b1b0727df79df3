#pragma once
// Whether the placement in force has drifted while a job exploits it ([exploration]
// drift_threshold, drift_steps): its reference is the median of the first measured steps of the
// exploitation (kBaselineSteps, or drift_steps if more: fresh steps, not a median that mixes in
// thousands measured before a drift or ten from a screening), and drift_steps steps in a row slower
// than the reference by more than drift_threshold are a drift. One median per exploitation: a
// median per report would cost a job of a million steps a sort of its history at every step.

#include <cstdint>
#include <optional>
#include <vector>

namespace placementd {

class DriftWatch {
 public:
  static constexpr int64_t kBaselineSteps = 30;

  DriftWatch(double threshold, int64_t steps) : threshold_(threshold), steps_(steps) {}

  /// A step on the placement in force: a `measured` one counts toward the baseline while there is
  /// no reference; one that `counts` (ran, was not profiled) and is slower than the reference by
  /// more than the threshold extends the run of slow steps, any other ends it.
  void observe(double step_time_s, bool measured, bool counts);
  /// drift_steps slow steps in a row.
  bool drifted() const { return slow_run_ >= steps_; }
  /// The reference afresh from the next measured steps.
  void restart();
  /// `median` (the placement's, as measured; nullopt: none yet) is the reference from now on.
  void set_reference(std::optional<double> median);
  /// nullopt until the baseline's steps are in.
  std::optional<double> reference() const { return reference_; }

 private:
  double threshold_;
  int64_t steps_;
  int64_t slow_run_ = 0;
  std::optional<double> reference_;
  std::vector<double> baseline_;
};

}  // namespace placementd
