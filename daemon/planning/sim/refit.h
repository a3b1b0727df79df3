#pragma once
// The planning model refitted to a job's measured steps (issue #45). A simulator built from
// profiles and presets is wrong in structured ways: a kind of kernel is slower on a kind of device
// than its profile or the cost model says, one device is slower than its siblings, a link is slower
// or faster than the topology's figure. The step times the job measured under its candidates say
// where: a placement that put convolutions on the host measured 3x what the model predicted. The
// refit scales the model by one factor per (op kind, device kind), one per device kind for the
// host's launches (every op's launches there, as the cost model counts them: most of a small op's
// time, little of a large one's), one per device and one per link, chosen by regularised least
// squares in log step time (Levenberg–Marquardt with finite differences) so the model predicts
// what was measured, with a prior that keeps each factor near 1 until the measurements show
// otherwise. Devices the model has compute at once may in truth take turns (slices of one GPU,
// time-sliced); no factor expresses that, so once the factors are fitted
// the refit screens each pair of one kind's devices as one execution resource and keeps the pair
// that screens best where, its factors fitted again, it makes the measurements 20 times as likely
// as the model without it fitted as long; one pair at a time. Factors no measured
// placement exercises stay at 1. Memory is never refitted: the memory model is exact. Op times the
// cost model predicts are refitted as the profiles it fills in for each device kind
// (Simulator::graph()): exact where a kind's devices share one spec.

#include <string>
#include <vector>

#include "placement/placement.h"
#include "planning/sim/simulator.h"

namespace placementd::sim {

/// A placement the job ran and the median of its measured steps. `log_sd`: how uncertain that
/// median is in log (the measurements' spread over √n, plus what the model cannot express).
struct MeasuredPlacement {
  placement::Placement placement;
  double step_time_s = 0.0;
  double log_sd = 0.05;
};

struct RefitOptions {
  /// The prior spread of a factor in log: a factor of 2 is one standard deviation at 0.7.
  double prior_log_sd = 0.7;
  /// The same for a device against its kind: devices of a kind are seldom far apart (a tenant or
  /// a lower clock makes one 1.3x slower at one standard deviation of 0.25).
  double device_prior_log_sd = 0.25;
  /// The same for the host's cost per launch on a device kind: a preset's figure is known to a
  /// few times at best (the GPU runs measured 10-19 us a launch, with the profiler's cost in it,
  /// where the H100 preset says 5; docs/gpu-runs/2026-11-26-2.md). A tighter prior has the fit
  /// spread a launch error over the op kinds with the most launches (docs/benchmarks.md).
  double launch_prior_log_sd = 1.5;
  /// Levenberg–Marquardt iterations at most (each builds one model per factor exercised).
  int iterations = 6;
  /// Log step of the finite differences.
  double step = 0.05;
  /// Wall time the fit may take (0: no limit); past it, the factors fitted so far are kept. A
  /// graph of tens of thousands of ops takes milliseconds a model to build.
  double max_seconds = 0.0;
};

/// One factor the refit moved: "aten::_convolution on cuda", "launch on cuda", "compute on
/// cuda:1", "link cpu:0 <-> cuda:0", and its scale (> 1: slower than the model said).
struct RefitFactor {
  std::string what;
  double scale = 1.0;
};

struct RefitResult {
  /// The refitted planning model (the given one's graph, devices and options, scaled).
  Simulator model;
  /// Factors moved by more than 1%, largest change first.
  std::vector<RefitFactor> factors;
  /// Devices the model had compute at once that the measurements say take turns, as "cuda:0 and
  /// cuda:1", in the order found: the refitted model has each pair share one execution resource
  /// (SimulatorOptions::shared_with).
  std::vector<std::string> shared;
  /// Root-mean-square of log(predicted / measured) over the measurements used, before and after
  /// (before: on the model with its cost-model predictions taken as profiles, which the fit
  /// scales; the same as the given model's where a kind's devices share one spec).
  double rms_log_error_before = 0.0;
  double rms_log_error_after = 0.0;
  /// Measurements used: those the model can time (it rejects none it ran, unless an op has no
  /// profile for the device kind it ran on and the device no spec).
  size_t used = 0;
  /// Whether RefitOptions::max_seconds ended the fit early, and whether any step was taken (a fit
  /// that ran out of time before its first is the model as it was).
  bool timed_out = false;
  bool moved = false;
};

/// Refits `model` to `measured`. Measurements the model cannot time (out of memory on it, an op
/// on a device it has neither profile nor spec for) are left out. Throws std::invalid_argument for
/// a time that is not positive and finite, a log_sd that is not positive, or a placement that does
/// not fit the model's graph and devices.
RefitResult refit(const Simulator& model, const std::vector<MeasuredPlacement>& measured,
                  const RefitOptions& options = {});

}  // namespace placementd::sim
