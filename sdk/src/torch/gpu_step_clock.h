#pragma once
// A step's time on the GPUs it runs on, read a step later. A host clock times a GPU's step only
// if the step ends by waiting for the GPU's kernels (a device-wide synchronisation), which leaves
// the GPU idle while the host prepares the next step: 8% of a 1 ms step on the H200. Instead an
// event on each GPU's current stream marks where the step starts and one where it ends; the step
// ends without waiting, and its time is read once the next step's kernels are queued, when the
// GPU has long passed its end. The time between the two events is the step as the GPU lived it:
// its kernels, and the gaps where it waited for the host (ops on the CPU, the host's optimizer
// step), whichever of the two was the bottleneck.

#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Event.h>

namespace placement::detail {

class GpuStepClock {
 public:
  /// The GPUs a job's steps run on (each once).
  explicit GpuStepClock(std::vector<c10::Device> gpus);

  /// One step's events.
  class Measurement {
   public:
    /// Waits until every GPU has passed the step's end; the longest time between its start and
    /// its end over the GPUs, less the parts excluded, in seconds.
    double seconds();

   private:
    friend class GpuStepClock;
    std::vector<c10::Event> starts;
    std::vector<c10::Event> ends;
    // Marks in pairs: from each even one to the next, not the step's own time.
    std::vector<std::vector<c10::Event>> excluded;
  };

  /// The step starts now: an event queued on each GPU's current stream (again after a retry).
  void start();
  /// What the GPUs do from here to end_excluded() is not the step's own (a guarded update's
  /// copies): timed by events too, since a host clock there would also count the wait for the
  /// kernels queued before it. An exclusion left open (its copies threw) counts nothing.
  void begin_excluded();
  void end_excluded();
  /// The step ends now: its end events queued; what start() began is handed over.
  Measurement end();

 private:
  std::vector<c10::Device> gpus_;
  Measurement running_;
};

}  // namespace placement::detail
