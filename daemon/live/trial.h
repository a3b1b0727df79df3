#pragma once
// A/B trials: is a challenger placement faster than the incumbent? Decided from interleaved windows
// of steps (C I I C C I I C …), so slow drift of the machine, another tenant's burst or a machine
// that gets slower half way hits both arms alike. Each pair of adjacent windows gives one
// difference of log step times; a Wilcoxon signed-rank test on those differences, with its
// Hodges–Lehmann interval, says "faster", "not faster by min_gain" or "unclear: extend". The test
// looks at the data only at planned pair counts (doubling up to the cap), each at (1 − confidence)
// / looks (Bonferroni), so extending an unclear trial never inflates the error rate of "faster".
//
// Pure statistics and bookkeeping: no session, no plugin, no clock; exploration.cpp drives it.

#include <cstdint>
#include <optional>
#include <vector>

namespace placementd {

/// A location shift estimate and its interval (covering with at least 1 − 2α, α at each end).
struct ShiftInterval {
  double estimate = 0.0;
  double low = 0.0;
  double high = 0.0;
};

/// Hodges–Lehmann estimate of the center of `d` (the median of its Walsh averages) and the
/// distribution-free interval of the Wilcoxon signed-rank test, from its exact null distribution.
/// nullopt when n is too small for any interval at α (2^-n > α).
std::optional<ShiftInterval> signed_rank_interval(const std::vector<double>& d, double alpha);

/// P(W+ <= w) for the signed-rank statistic of n untied pairs under the null (exact).
double signed_rank_cdf(int n, int64_t w);

/// log of a window's interquartile mean (the middle half of its steps): robust to a spike from
/// another tenant, nearly as efficient as the mean on well-behaved noise.
double window_log_center(std::vector<double> steps);

/// What a trial may cost and how sure it must be.
struct TrialPlan {
  /// Measured steps per window (each arm's windows; warm-up after a swap not counted).
  int64_t window_steps = 10;
  /// Most measured steps, both arms together; the trial ends undecided (the incumbent stays) there.
  int64_t max_steps = 4000;
  /// One-sided confidence of a "faster" verdict, over all the trial's looks together.
  double confidence = 0.99;
  /// The smallest gain worth the trial: it ends "not faster" as soon as the futility interval
  /// rules out a gain this large.
  double min_gain = 0.02;
  /// α of the interval whose lower end rules out min_gain: loose for a screening trial, which
  /// should spend little on an equal challenger; refinement's long trials, there to find gains
  /// too small for one, and the final check, whose challenger won a trial already, set 0.01.
  double futility_alpha = 0.1;

  /// The window pairs at which the trial looks: doubling from the first count that can reach its
  /// α (at least 8) up to the cap (max_steps / 2 windows, or that first count if it is more).
  std::vector<int64_t> looks() const;
  /// α at each end of each look's interval.
  double alpha_per_look() const;
};

/// kNotFaster: the interval rules out a gain of min_gain. kUnclear: the cap came first. Either way
/// the incumbent stays. kFasterByEstimate: the cap came first, and the challenger is the arm the
/// estimate favours (Trial::by_estimate; refinement's long trials only): it becomes the incumbent,
/// without the trial's confidence.
enum class TrialVerdict { kUndecided, kFaster, kNotFaster, kUnclear, kFasterByEstimate };
/// "faster", "not faster", "unclear", "faster by its estimate", "undecided".
const char* to_string(TrialVerdict v);

/// One trial's windows and differences. Arm 0 is the incumbent, arm 1 the challenger.
class Trial {
 public:
  Trial(uint64_t incumbent, uint64_t challenger, TrialPlan plan, bool final_check);

  uint64_t incumbent() const { return ids_[0]; }
  uint64_t challenger() const { return ids_[1]; }
  /// A final check: the start (as incumbent) against the placement exploration chose.
  bool final_check() const { return final_check_; }
  const TrialPlan& plan() const { return plan_; }

  /// The candidate whose window runs now (windows go C I | I C | C I | …).
  uint64_t running() const;
  /// Adds a measured step of `candidate`; steps of the arm not running are ignored (a report in
  /// flight across a swap belongs to no window). Returns true when the running window is full.
  bool add(uint64_t candidate, double step_time_s);
  /// Closes the running window: a pair completes every second window. Returns the verdict at a
  /// planned look; kUndecided otherwise (the next window then runs).
  TrialVerdict close_window();

  int64_t pairs() const { return static_cast<int64_t>(differences_.size()); }
  int64_t measured_steps() const { return measured_; }
  /// The last look's interval of log(challenger / incumbent); nullopt before the first look.
  const std::optional<ShiftInterval>& last_look() const { return last_; }
  /// At the cap (or the budget's end) of a trial between near-equals: one last look at all the
  /// pairs so far (last_look() is then that), and kFasterByEstimate when its Hodges–Lehmann
  /// estimate has the challenger faster, else kUnclear. Which of two placements a long trial could
  /// not tell apart the job runs on costs it at most the difference the trial could not resolve;
  /// the estimate's side is the likelier to be the faster.
  TrialVerdict by_estimate();
  /// The exact one-sided p-value of "the challenger is faster" from the pairs so far (the
  /// signed-rank test), times the trial's looks: its evidence with its own Bonferroni share, which
  /// another test of the same question may reuse. 1 before a pair.
  double p_faster() const;

 private:
  uint64_t ids_[2];
  TrialPlan plan_;
  bool final_check_;
  std::vector<int64_t> looks_;
  double alpha_;  // plan_.alpha_per_look(), which recomputes the looks
  size_t next_look_ = 0;
  int64_t window_ = 0;  // index of the running window
  std::vector<double> window_steps_;
  std::optional<double> pending_;    // the log center of the running pair's first window
  std::vector<double> differences_;  // log(challenger) − log(incumbent), one per pair
  int64_t measured_ = 0;
  std::optional<ShiftInterval> last_;
};

}  // namespace placementd
