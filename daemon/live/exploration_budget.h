#pragma once
// What exploration may cost a job ([exploration] max_overhead_fraction): a step off the placement
// in force costs its time beyond that placement's (the reference: the mean of its latest steps).
// A job that said how many steps it runs may spend the fraction of their time at the reference's
// pace; one that did not gets the fraction as a pace over the time measured so far, pausing above
// it and resuming at half of it. The session keeps the costs it measured (SessionCounters); this
// class holds the reference and is the one place the allowance is worked out.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace placementd {

class ExplorationBudget {
 public:
  /// Steps of the placement in force whose mean is the reference: recent enough to follow the
  /// machine, enough that another tenant's spike moves it little.
  static constexpr size_t kReferenceSteps = 512;
  /// The first candidates always run, paced or not: there is no best to fall back on yet.
  static constexpr size_t kCandidatesBeforePacing = 3;
  /// A paused exploration resumes once its cost is down to this fraction of the pace's allowance.
  static constexpr double kResumeAtFractionOfAllowance = 0.5;

  /// `expected_steps` 0: the job did not say (paced).
  ExplorationBudget(double max_overhead_fraction, uint64_t expected_steps)
      : fraction_(max_overhead_fraction), expected_steps_(expected_steps) {}

  /// The placement in force's step times, oldest first: the reference becomes the mean of the
  /// latest kReferenceSteps (none: it stays as it was).
  void set_reference(const std::vector<double>& step_times);
  std::optional<double> reference() const { return reference_; }
  /// What a step of `step_time_s` off the placement in force cost beyond it; nullopt until the
  /// reference is measured.
  std::optional<double> cost_of(double step_time_s) const;

  /// A job that said its steps: whether `cost_s` reached the fraction of their time.
  bool spent(double cost_s) const;
  /// A paced job, past its first candidates: whether `cost_s` is above the fraction of
  /// `measured_s`, the time its measured steps took.
  bool over_pace(size_t candidates, double cost_s, double measured_s) const;
  /// Whether a paused exploration may resume: its cost down to half the pace's allowance.
  bool may_resume(double cost_s, double measured_s) const;
  /// How much of the allowance `cost_s` is, for the job's status (0 where none applies yet).
  double used(double cost_s, double measured_s) const;

 private:
  /// Seconds exploration may cost: of the expected steps at the reference's time (nullopt until
  /// it is measured), or, paced, of `measured_s`.
  std::optional<double> expected_allowance() const;
  double paced_allowance(double measured_s) const { return fraction_ * measured_s; }

  double fraction_;
  uint64_t expected_steps_;
  std::optional<double> reference_;
};

}  // namespace placementd
