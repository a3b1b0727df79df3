#pragma once
// Refinement ([exploration] refine_contenders, refine_fraction, refine_min_gain): when exploration
// ends in a job that said how many steps it runs, the candidates likeliest to be faster than the
// best by refine_min_gain each get one long trial against it, in equal shares of refine_fraction
// of the job's steps. This holds where refinement stands (whether it began and applied, the
// contenders still to try, the step it began at, whether the trial running is one of its) and
// works out its long trials' steps; which candidates contend, and the trials themselves, are
// exploration.cpp's.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace placementd {

/// The steps of refinement's next long trial: an equal share of the `left` steps among the
/// `waiting` contenders (it and those after it), as many as afford `shortest` steps each (a final
/// check's); 0 when not even one does.
int64_t long_trial_share(int64_t left, int64_t shortest, int64_t waiting);

class Refinement {
 public:
  /// A long trial's steps at most, whatever a job says it will run (expected_steps is the job's
  /// word, up to 2^64): far beyond any trial's use, and safe to convert and add to.
  static constexpr double kMostSteps = 1e15;
  /// A candidate's id and its measured log step-time ratio to the best.
  using Contender = std::pair<uint64_t, double>;

  Refinement(double refine_fraction, uint64_t expected_steps)
      : fraction_(refine_fraction), expected_steps_(expected_steps) {}

  /// Whether begin() ran: refinement is considered once, when exploration first ends.
  bool began() const { return began_; }
  /// Begins at the job's step `step`; it applies when `applies` (and its final check is then as
  /// long as its trials), with `contenders`, likeliest first.
  void begin(bool applies, std::vector<Contender> contenders, uint64_t step);
  bool applied() const { return applied_; }
  /// The next contender, off the list; nullopt when none is left.
  std::optional<Contender> next_contender();
  size_t contenders_left() const { return contenders_.size(); }
  /// Refinement is over: the contenders left are not tried.
  void end() { contenders_.clear(); }
  /// Whether the trial running is one of refinement's long trials.
  bool running() const { return running_; }
  void set_running(bool running) { running_ = running; }

  /// What a long trial (refinement's, or a final check as long) may take at the job's step
  /// `job_steps`, `used` steps of refinement spent: refine_fraction of the expected steps less
  /// `used`, at most half the steps the job has left (a gain found later pays for little) and
  /// kMostSteps.
  double long_trial_cap(uint64_t job_steps, double used) const;
  /// The steps long trials may take now, 0 when that is no longer than `shortest` (an ordinary
  /// final check's), which would decide nothing a trial did not.
  int64_t steps_left(uint64_t job_steps, int64_t shortest) const;
  /// The next contender's long trial: its equal share of steps_left() among it and the contenders
  /// after it (long_trial_share). A first contender that took all that is left, ending "unclear"
  /// on a gain smaller than the trial could resolve, left the likelier gains after it untried.
  int64_t share(uint64_t job_steps, int64_t shortest) const;

 private:
  double fraction_;
  uint64_t expected_steps_;
  bool began_ = false;
  bool applied_ = false;
  std::vector<Contender> contenders_;
  uint64_t from_step_ = 0;
  bool running_ = false;
};

}  // namespace placementd
