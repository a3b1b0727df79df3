#pragma once
// What one training step agrees with the job's other processes. A process alone has none
// (alone_peers); the ranks of a data-parallel replica group (replica_peers) apply rank 0's
// directives at the same boundary, retry together when any rank fails, average their gradients
// and report the slowest rank's time. Job::step calls these in this order, once a
// step (agree once more after a retry; agree_update after a guarded update).

#include <memory>
#include <optional>

namespace placement {
class Model;
class StepOptimizer;
struct Placement;
struct ReceivedDirective;
struct ReportedStep;
}  // namespace placement

namespace placement::detail {

struct JobCore;
struct ReplicaConfig;

/// How one process's forward, loss and backward ended.
enum class StepFailure {
  kNone,
  /// Forward, the loss or backward threw: the placement's failure, retried on the last good one.
  kPlacement,
  /// The user's loss function failed as it would under the job's own placement: the step ends,
  /// unretried.
  kLossFunction,
  /// The user's loss function interrupted the step (StepInterrupted: Ctrl-C): it ends, unretried.
  kInterrupted,
};

struct StepAgreement {
  /// The rank whose placement failure every process retries with (nullopt: none).
  std::optional<int> failed_rank;
  /// The rank whose loss function ended the step: it ends on every process (nullopt: none).
  std::optional<int> loss_error_rank;
  /// Whether a rank's loss function ended it by interrupting it (StepInterrupted).
  bool interrupted = false;
};

/// How a guarded update (JobOptions::guarded_updates) ended across the processes.
struct UpdateAgreement {
  /// The rank whose update failed: every process undoes its update and retries the step.
  std::optional<int> failed_rank;
  /// The rank whose update was interrupted (StepInterrupted): every process undoes its update and
  /// the step ends.
  std::optional<int> interrupted_rank;
};

class StepPeers {
 public:
  virtual ~StepPeers() = default;
  /// At the step boundary: switches `job` to the directive due now, if any, on every process or
  /// on none.
  virtual void boundary(JobCore& job, StepOptimizer& optimizer) = 0;
  /// After forward and backward, with how this process's ended: what every process does next.
  /// Called again after each retry. A group's rank 0 also offers the directive placementd sent
  /// here, and reports the step before.
  virtual StepAgreement agree(JobCore& job, StepFailure failure) = 0;
  /// Before the update: the gradients every process steps with.
  virtual void reduce_gradients(JobCore& job) = 0;
  /// After a guarded update, with how this process's ended (kNone, kPlacement or kInterrupted):
  /// what every process does next. Every process guards the same steps (they switch together).
  virtual UpdateAgreement agree_update(JobCore& job, StepFailure failure) = 0;
  /// After the update: the step's report (JobCore::step_report) goes where placementd measures it.
  virtual void step_done(JobCore& job, const ReportedStep& step) = 0;
};

/// A process alone.
std::unique_ptr<StepPeers> alone_peers();
/// Every rank of `job`'s group (job.group) switches to `target` or none does: each stages its
/// copies (JobCore::stage_switch), and all commit only when every rank could, so nothing moves
/// back (with an optimizer that can stage its state). Returns whether the group switched.
bool switch_together(JobCore& job, StepOptimizer& optimizer, ReceivedDirective target);
/// Joins the replica group `config` describes (job.group) with the job's replica peers
/// (job.peers), after checking that every rank has the same kinds of devices, the same
/// collectives and the same `start` placement; every rank then starts from rank 0's parameters
/// and buffers, as torch's DistributedDataParallel does. Throws std::invalid_argument naming what
/// differs, std::runtime_error when the other ranks do not come.
void join_replica_group(JobCore& job, const ReplicaConfig& config, const Placement& start,
                        const Model& model);

}  // namespace placement::detail
