#pragma once
// Simulated annealing over a grouping's device assignment, against a Simulator: the search behind
// the "simulator" warm start (issue #4, "train against the simulator before it ever touches real
// steps"). The simulator evaluates a placement in microseconds, so tens of thousands of candidates
// cost about a second where a live job could afford a hundred.

#include <cstdint>
#include <vector>

#include "placement/placement.h"
#include "planning/sim/simulator.h"

namespace placementd::sim {

struct AnnealOptions {
  /// Placements simulated at most (rejected moves included).
  int64_t evaluations = 20000;
  uint64_t seed = 1;
  /// First temperature as a fraction of the start's step time: a move that makes the step this much
  /// slower is accepted with probability 1/e at first.
  double start_temperature = 0.02;
  /// Last temperature over the first; the schedule is geometric in between.
  double cooling = 1e-3;
  /// Stop after this much wall time (0: no limit; then the result depends on the seed alone). The
  /// daemon runs the search before answering a job's graph upload, which must not take long.
  double max_seconds = 0.0;
  /// More models to time every placement on: the search minimises the mean step time over
  /// `simulator` and these (robust to what the models disagree on). Empty: `simulator` alone.
  /// Their memory is not checked: `simulator`'s decides (sim::with_model_error's copies, which the
  /// warm start passes, differ from it in times only).
  std::vector<const Simulator*> ensemble;
};

struct AnnealResult {
  /// The best placement found: a device per group of the grouping.
  std::vector<int> device_of_group;
  double step_time_s = 0.0;
  double start_step_time_s = 0.0;
  int64_t evaluations = 0;
};

/// Moves one group to another device or swaps two groups' devices, keeping what the temperature
/// allows and never a placement the memory model rejects or the simulator cannot time (an op on a
/// device kind it has no profile for). Deterministic for a seed. Throws std::invalid_argument if
/// `start` does not fit the grouping or is itself rejected (the reason included).
AnnealResult anneal(const Simulator& simulator, const placement::Grouping& grouping,
                    std::vector<int> start, const AnnealOptions& options);

}  // namespace placementd::sim
