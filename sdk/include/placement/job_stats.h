#pragma once
// What a job counts of its own steps (Job::stats), in a header of its own so that the parts of the
// SDK that fill it need not include the job API above them.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace placement {

struct JobStats {
  uint64_t steps = 0;
  /// Placement changes applied at step boundaries.
  uint64_t swaps = 0;
  uint64_t migrated_bytes = 0;
  /// Time the swaps took, their copies included (not those of a swap that failed).
  double migration_seconds = 0.0;
  /// Steps that failed on a candidate placement and were run again on the last good one.
  uint64_t retried_steps = 0;
  /// Optimizer steps run guarded (JobOptions::guarded_updates), those of them that failed and
  /// were undone (each also a retried step), and the time the copies that guard them took.
  uint64_t guarded_updates = 0;
  uint64_t undone_updates = 0;
  double guard_seconds = 0.0;
  /// Parameters updated while the backward went on (StepOptimizer::steps_parameters_apart: those
  /// that live on the host and are read on another device), once per parameter and step, and the
  /// time the host spent on those updates and on the copies that let a failed step undo them.
  uint64_t overlapped_updates = 0;
  double overlapped_update_seconds = 0.0;
  /// Placement changes that failed: a copy failed (here, or on another rank of a replica group),
  /// so nothing moved and the placement in force stayed.
  uint64_t failed_swaps = 0;
  /// Steps run under the per-op profiler (placementd asked for profiles), and profiles sent.
  uint64_t profiled_steps = 0;
  uint64_t profiles_sent = 0;
  /// The daemon's id of the placement in force (0: the job's own, not from placementd).
  uint64_t placement_id = 0;
  /// The reason and session state of the directive in force (messages::to_string of its Reason
  /// and JobState: "start", "best"; "exploring", ...); "own" and "" for the job's own placement.
  std::string reason;
  std::string state;
  /// The last step's time as reported to placementd. A process alone on GPUs reads a step's time
  /// from the GPUs at the end of the next step (docs/live.md): there it is the step before's (0
  /// after the first step), and Job::detach() reads the last one's.
  double last_step_s = 0.0;
  /// This process's rank in its replica group and the group's size (0 and 1 without one), the
  /// group's name (as `placementctl jobs` shows it on every node; empty without one), and the time
  /// its steps spent averaging gradients with the other ranks.
  int rank = 0;
  int world_size = 1;
  std::string replica_group;
  double allreduce_seconds = 0.0;
  /// Per device a collective has used so far ("cpu", "cuda:0"), what carried it: "gloo", "nccl",
  /// or "gloo through host memory: <why not NCCL>".
  std::map<std::string, std::string> collectives;
  /// Per device (in Job::devices() order), the most it held during the last step's forward and
  /// backward: for a CUDA device its caching allocator's peak, for a logical CPU device the job's
  /// own count (JobOptions::memory_limit_bytes turns it on; 0 without it).
  std::vector<uint64_t> peak_bytes;
  /// The pinned pool (JobOptions::host_pinned_bytes): its budget, what it holds locked now and
  /// at most so far, and the allocations it refused at the budget. For this process.
  uint64_t pinned_limit_bytes = 0;
  uint64_t pinned_bytes = 0;
  uint64_t pinned_peak_bytes = 0;
  uint64_t pinned_refusals = 0;
};

}  // namespace placement
