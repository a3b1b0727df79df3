#pragma once
// The per-op profiler as a piece the job API can wrap around its own training steps (profile_steps
// in placement/profiler.h runs whole steps itself; a job's steps are the user's).

#include <memory>
#include <vector>

#include "placement/engine.h"
#include "placement/graph.h"

namespace placement::detail {

class Recorder;

/// Measures every op of the steps run while it exists, as profile_steps() does. It is `module`'s
/// observer meanwhile and passes every op on to `also` first (the job's memory limit, which may
/// throw); destroyed, it gives the module back to `also`.
class StepProfiler {
 public:
  explicit StepProfiler(PlacedModule& module, OpObserver* also = nullptr);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Ends the forward and backward of a step: each op's time in it becomes one sample.
  void end_forward_backward();
  /// The same step's optimizer update, split among the ops by parameter bytes.
  void add_update(double seconds);
  /// Steps completed (add_update() calls).
  int steps() const { return static_cast<int>(updates_.size()); }
  /// Each op's median over the completed steps, for the kind of device it ran on.
  std::vector<OpProfile> profiles() const;

 private:
  PlacedModule& module_;
  OpObserver* also_;
  std::unique_ptr<Recorder> recorder_;
  std::vector<std::vector<double>> forward_, backward_;
  std::vector<double> updates_;
};

}  // namespace placement::detail
