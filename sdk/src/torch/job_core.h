#pragma once
// What a placement::Job holds and does between its steps: the placed module, the directive in
// force and the one to fall back to, switching between them with the optimizer's state, reports
// to placementd and the per-op profiling it asks for. Job::step (job.cpp) is the one step
// sequence over it; what a step agrees with the job's other processes is StepPeers'
// (step_peers.h).

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "device_memory.h"
#include "gpu_step_clock.h"
#include "optimizer_state.h"
#include "placement/job.h"
#include "replica_group.h"
#include "step_profiler.h"

namespace placement::detail {

class StepPeers;

/// The user's loss function ended the step: it interrupted it (StepInterrupted) or failed as it
/// would under the job's own placement (loss_error_is_the_users). `error` as thrown.
struct LossFunctionError {
  std::exception_ptr error;
  bool interrupted = false;  // StepInterrupted: the user stops training
};

/// The physical device of every tensor in a forward's outputs, in order (through tuples, lists and
/// dicts).
std::vector<c10::Device> devices_of(const std::vector<c10::IValue>& outputs);

/// Whether an error the loss function threw is the user's own rather than the placement's: it is
/// no device's failure (out of memory, an accelerator error) and the outputs the loss function
/// was given sit on the devices they have under the job's own placement (`own`; nullopt while no
/// step has shown them), so the same call fails there too. Anything else may be the placement's
/// (outputs on two devices mixed with the job's labels) and is retried on the last good one.
bool loss_error_is_the_users(const std::exception_ptr& error,
                             const std::vector<c10::Device>& outputs,
                             const std::optional<std::vector<c10::Device>>& own);

/// A step report and the attachment it was made under (JobChannel::report's two arguments).
struct ReportedStep {
  uint64_t generation = 0;
  messages::StepReport step;
};

struct JobCore {
  // Placement id 0 is the job's own placement, not one of placementd's.
  using InForce = ReceivedDirective;
  // Profiling placementd asked for: steps under `placement_id`, after `warmup_left` plain ones.
  struct Profiling {
    uint64_t placement_id = 0;
    int warmup_left = 1;
    std::unique_ptr<StepProfiler> profiler;
    // Per device, the most its profiled steps' forward and backward held (stats.peak_bytes).
    std::vector<uint64_t> peaks;
    // Per device, what lived there by kind when their backward ended, the most of each.
    std::vector<messages::HeldBytes> held;
  };

  JobCore();
  ~JobCore();

  OpGraph graph;
  DeviceSet devices;
  std::unique_ptr<PlacedModule> placed;
  std::unique_ptr<DeviceMemory> memory;
  std::unique_ptr<JobChannel> channel;
  bool any_cuda = false;
  InForce current;
  bool current_ran = false;  // a step succeeded under `current`
  // Optimizer steps run under `current` since the switch to it, and how many of those are guarded
  // (JobOptions::guarded_updates; -1: all).
  uint64_t updates_under_current = 0;
  int guarded_updates = 1;
  // Whether what lives on the host is updated while the backward goes on (JobOptions).
  bool overlap_updates = true;
  // The pinned pool's budget: the job's option (0: none) and the one last applied.
  uint64_t host_pinned_option = 0;
  uint64_t host_pinned_applied = 0;
  // placementd's figure, applied at a step boundary once the channel has it.
  void apply_pinned_budget();
  // Where a failing placementd placement falls back to: the last one a step succeeded under, and
  // before any did, the job's own (a failure under that is the model's, not placementd's).
  InForce last_good;
  // The job's own placement (id 0): the last resort when the last good one fails too.
  InForce own;
  // Where the model's outputs are under the job's own placement, from the first forward that ran
  // with every op where it puts them (the loss function's errors are judged against it).
  std::optional<std::vector<c10::Device>> own_output_devices;
  JobStats stats;
  int profile_steps = 0;
  std::optional<Profiling> profiling;
  // The ops whose profiles this job sent in attachment `sent_generation`, each with the device
  // kinds it was timed on. placementd decides on a directive when a step report arrives, which may
  // be before the profiles measured ahead of it: a request whose every op is already on its way to
  // the same session, timed on the kind the request puts it on, is not run again. Per op: a start
  // spread over a CPU and a GPU times each op on one kind only, and the all-on-GPU placement after
  // it must time the rest on the GPU.
  uint64_t sent_generation = 0;
  std::vector<std::set<DeviceKind>> sent_kinds_of_op;
  // Data-parallel replicas: the group (none for a process alone), and what a step agrees with it.
  std::unique_ptr<ReplicaGroup> group;
  std::unique_ptr<StepPeers> peers;
  // A process alone on GPUs times its steps by events on them, each read at the end of the next
  // step (gpu_step_clock.h); elsewhere, and in profiled steps, the host's clock after waiting for
  // the GPUs. Made at the first step.
  std::optional<GpuStepClock> gpu_clock;
  // The step whose time is still on the GPUs: its report, all but the time.
  struct PendingStep {
    GpuStepClock::Measurement measured;
    ReportedStep report;
  };
  std::optional<PendingStep> pending_step;
  /// Reads the pending step's time, reports it under the placement it ran on (as report() does)
  /// and makes it stats.last_step_s. Every report() does it first, so reports keep their order.
  void report_pending();

  /// Moves the module and the optimizer's state to `target`; false when that fails, everything
  /// then as it was (a directive of placementd's is reported failed by the process that decides).
  bool switch_to(InForce target, StepOptimizer& optimizer);
  /// switch_to in two halves, for a replica group's ranks, which switch together or not at all:
  /// stage_switch copies what `target` moves (nullopt when a copy fails: nothing changed, a
  /// failed swap as switch_to counts and reports it); commit_switch installs the copies and makes
  /// `target` the placement in force. It fails (false, nothing changed) only where the optimizer
  /// cannot stage its state and moving it fails then.
  std::optional<StagedMove> stage_switch(const InForce& target, StepOptimizer& optimizer);
  bool commit_switch(InForce target, StepOptimizer& optimizer, StagedMove staged);
  /// A swap to `target` failed with `error`: counted, and reported by the process that decides.
  void swap_failed(const InForce& target, const std::string& error);
  /// Starts counting a step's memory (the logical devices' with limits, the GPUs' peaks).
  void begin_memory(StepOptimizer& optimizer);
  /// In a profiled step whose backward just ended: notes what each device holds by kind
  /// (parameters and buffers at home, gradients, `optimizer`'s state, kept copies).
  void note_held(StepOptimizer& optimizer);
  /// Ends it: the limits no longer hold, the peaks go to stats.peak_bytes.
  void end_memory();
  /// Forward, the loss and backward under the placement in force; returns the loss. A
  /// StepInterrupted from the loss function, or an error that is the user's own
  /// (loss_error_is_the_users), arrives as a LossFunctionError; anything else as thrown.
  at::Tensor forward_backward(const std::vector<c10::IValue>& inputs, const LossFunction& loss_fn);
  /// The report of the step being run, under the directive in force: the one place a step report
  /// is made (its error cut to what the protocol keeps). What differs later (a group's slowest
  /// time, a time read from the GPUs a step later) is overwritten, nothing else.
  ReportedStep step_report(bool ok, double seconds, const std::string& error = "",
                           bool profiled = false) const;
  /// Sends it to placementd, after the pending one. A follower reports every step to its own
  /// daemon, which only shows them; rank 0 and a process alone report the steps under
  /// placementd's placements, which reward them.
  void report(const ReportedStep& step);
  /// Whether this step runs under the profiler (starting it on the first such step).
  bool begin_profiled_step();
  /// After a profiled step: once enough are measured, the ops' medians go to placementd, each for
  /// the kind of device the op ran on, and into this job's graph.
  void end_profiled_step();
  /// Rank 0 of a group, or a process alone: the process whose placementd decides.
  bool leader() const { return !group || group->rank() == 0; }
  /// The job's device each tensor lives on (-1: none), which pairs it with the other ranks' copy.
  std::vector<int> slots_of(const std::vector<at::Tensor>& tensors) const;

  /// Whether every op of `target` has its profile on the kind `target` puts it on already sent
  /// to `target`'s attachment (note_profiles_sent()): a request for profiles then is not run.
  bool profiles_on_their_way(const InForce& target) const;
  /// Notes the profiles just sent, measured under `measured`.
  void note_profiles_sent(const InForce& measured);
};

}  // namespace placement::detail
