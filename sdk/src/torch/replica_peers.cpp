// The ranks of a data-parallel replica group: one placement holds for the whole group. Rank 0's
// placementd chooses it; every rank applies it at the same step boundary or none does; a step
// that failed on any rank is retried by all; the gradients are averaged before the update; the
// slowest rank's time is the measurement.

#include <array>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "device_sync.h"
#include "job_core.h"
#include "placement/messages.h"
#include "step_peers.h"
#include "stopwatch.h"

namespace placement::detail {
namespace {

// An exchanged rank + 1 (0: none) as the rank.
std::optional<int> rank_in(double agreed) {
  const int r = static_cast<int>(agreed) - 1;
  return r >= 0 ? std::optional<int>(r) : std::nullopt;
}

class ReplicaPeers final : public StepPeers {
 public:
  // The directive rank 0 offered in the step before is applied by every rank, or by none.
  void boundary(JobCore& job, StepOptimizer& optimizer) override {
    if (!directive_due_) return;
    directive_due_ = false;
    std::optional<ReceivedDirective> offered = std::move(held_);
    held_.reset();
    ReplicaGroup& group = *job.group;
    const std::string sent =
        group.broadcast(offered ? offered->directive.to_json(job.devices).dump() : std::string());
    ReceivedDirective target;
    if (offered) {
      target = std::move(*offered);
    } else {
      target.directive =
          messages::Directive::from_json(nlohmann::json::parse(sent), job.graph, job.devices);
      target.directive.profile = false;  // rank 0 profiles for placementd
    }
    switch_together(job, optimizer, std::move(target));
  }

  // One small exchange a step (and one more after a retry), after backward (a plain data-parallel
  // loop has none; the gradients' buckets follow): whether any rank failed under the placement
  // (all retry with it) or in its loss function (the step ends everywhere); whether rank 0
  // offers a directive (every rank applies it at the next boundary); the slowest rank's time of
  // the step before (placementd's measurement); which parameters any rank's step reached. A
  // parameter none reached keeps no gradient, so the optimizer skips it as in one process; one
  // that some reached counts as zeros on the others.
  StepAgreement agree(JobCore& job, StepFailure failure) override {
    ReplicaGroup& group = *job.group;
    if (job.channel && !held_) held_ = job.channel->take_directive();
    parameters_ = job.placed->parameters();
    const double rank = group.rank() + 1.0;
    std::vector<double> v = {failure == StepFailure::kPlacement ? rank : 0.0, held_ ? 1.0 : 0.0,
                             pending_report_ ? pending_report_->step.step_time_s : 0.0,
                             failure == StepFailure::kLossFunction ? rank : 0.0,
                             failure == StepFailure::kInterrupted ? rank : 0.0};
    for (const at::Tensor& p : parameters_) v.push_back(p.grad().defined() ? 1.0 : 0.0);
    agreed_ = group.max(v);
    directive_due_ = agreed_[1] > 0.0;
    if (pending_report_) {
      // The step before's, under the placement it ran on (a switch since moved the job on).
      pending_report_->step.step_time_s = agreed_[2];  // the slowest rank's
      job.report(*pending_report_);
    }
    pending_report_.reset();
    // The rank whose loss function ended the step: one that interrupted it (the highest, when
    // several did), else one whose loss function failed.
    const std::optional<int> interrupted = rank_in(agreed_[4]);
    return {rank_in(agreed_[0]), interrupted ? interrupted : rank_in(agreed_[3]),
            interrupted.has_value()};
  }

  void reduce_gradients(JobCore& job) override {
    constexpr size_t kReachedAt = 5;
    // Backward's kernels end first, so that allreduce_seconds is the exchange's own time.
    if (job.any_cuda) synchronize_cuda_devices(job.devices);
    const auto started = Clock::now();
    std::vector<at::Tensor> reached;
    for (size_t i = 0; i < parameters_.size(); ++i)
      if (agreed_[kReachedAt + i] > 0.0) reached.push_back(parameters_[i]);
    job.group->average_gradients(reached, job.slots_of(reached));
    job.stats.allreduce_seconds += seconds_since(started);
  }

  // One more small exchange after a guarded update (the first steps under a placement).
  UpdateAgreement agree_update(JobCore& job, StepFailure failure) override {
    const double rank = job.group->rank() + 1.0;
    const std::vector<double> agreed =
        job.group->max({failure == StepFailure::kPlacement ? rank : 0.0,
                        failure == StepFailure::kInterrupted ? rank : 0.0});
    return {rank_in(agreed[0]), rank_in(agreed[1])};
  }

  // Rank 0's time goes to placementd after the next step's exchange, once the slowest rank's is
  // known; a follower reports every step to its own daemon, which only shows them.
  void step_done(JobCore& job, const ReportedStep& step) override {
    if (job.leader())
      pending_report_ = step;
    else
      job.report(step);
  }

 private:
  std::optional<ReportedStep> pending_report_;
  // A directive rank 0 took and offered in a step's exchange, and whether one is due at the next
  // boundary (every rank knows that from the exchange).
  std::optional<ReceivedDirective> held_;
  bool directive_due_ = false;
  // The last exchange's answer, over these parameters.
  std::vector<double> agreed_;
  std::vector<at::Tensor> parameters_;
};

}  // namespace

bool switch_together(JobCore& job, StepOptimizer& optimizer, ReceivedDirective target) {
  ReplicaGroup& group = *job.group;
  // Every rank makes its copies; all install them, or none does and nothing needs moving back.
  std::optional<StagedMove> staged = job.stage_switch(target, optimizer);
  int failed_rank = static_cast<int>(group.max({staged ? 0.0 : group.rank() + 1.0})[0]) - 1;
  if (failed_rank >= 0) {
    // The rank that failed counted and reported its own failure; the others count it here.
    if (staged) job.swap_failed(target, "migration failed on rank " + std::to_string(failed_rank));
    return false;
  }
  const JobCore::InForce before = job.current;
  const bool moved = job.commit_switch(target, optimizer, std::move(*staged));
  // A commit fails only where the optimizer cannot stage and moves its state then; every rank
  // still asks (one small exchange a swap), so all take the same path and the same collectives.
  failed_rank = static_cast<int>(group.max({moved ? 0.0 : group.rank() + 1.0})[0]) - 1;
  if (failed_rank < 0) return true;
  // The others move back, which can fail too: StepOptimizer::stage_state avoids all this.
  if (moved) {
    job.switch_to(before, optimizer);
    job.swap_failed(target, "migration failed on rank " + std::to_string(failed_rank));
  }
  return false;
}

void join_replica_group(JobCore& job, const ReplicaConfig& config, const Placement& start,
                        const Model& model) {
  job.group = std::make_unique<ReplicaGroup>(config);
  job.peers = std::make_unique<ReplicaPeers>();
  // Rank 0's placements name devices by position: every rank needs as many, of the same kinds.
  ReplicaGroup& group = *job.group;
  const std::string rank = "replica group: rank " + std::to_string(group.rank());
  std::vector<double> kinds;
  for (const Device& d : job.devices.devices) kinds.push_back(static_cast<double>(d.kind));
  if (!group.same_on_every_rank({static_cast<double>(kinds.size())}) ||
      !group.same_on_every_rank(kinds)) {
    std::string names;
    for (const Device& d : job.devices.devices) names += (names.empty() ? "" : ", ") + d.name();
    throw std::invalid_argument(
        rank + " has the devices " + names +
        ", another rank has others: every rank lists as many devices, of the same kinds in "
        "the same order, since rank 0's placements name them by position");
  }
  // Ranks that disagree on these would wait for each other in different collectives.
  const std::vector<double> collectives = {static_cast<double>(config.cuda_collectives),
                                           nccl_built() ? 1.0 : 0.0};
  if (!group.same_on_every_rank(collectives))
    throw std::invalid_argument(
        rank + " has cuda_collectives " +
        std::array<const char*, 3>{"auto", "nccl", "gloo"}.at(
            static_cast<size_t>(config.cuda_collectives)) +
        " in a build " + (nccl_built() ? "with" : "without") +
        " NCCL; another rank differs: every rank needs the same cuda_collectives and the "
        "same build of the SDK");
  // A guarded update ends in an exchange (agree_update): every rank guards the same steps.
  if (!group.same_on_every_rank({static_cast<double>(job.guarded_updates)}))
    throw std::invalid_argument(rank + " has guarded_updates " +
                                std::to_string(job.guarded_updates) +
                                "; another rank differs: every rank needs the same");
  // 16 hex digits, compared as two halves that a double holds exactly.
  const std::string start_fingerprint = start.fingerprint();
  if (!group.same_on_every_rank(
          {static_cast<double>(std::stoull(start_fingerprint.substr(0, 8), nullptr, 16)),
           static_cast<double>(std::stoull(start_fingerprint.substr(8), nullptr, 16))}))
    throw std::invalid_argument(
        rank +
        " starts from another placement than another rank (start_device_of_op): "
        "every rank starts from the same one");
  // Every replica starts from rank 0's weights, as torch's DistributedDataParallel does.
  std::vector<at::Tensor> state = job.placed->parameters();
  for (const auto& [buffer_name, b] : model.named_buffers()) state.push_back(b);
  group.broadcast(state, job.slots_of(state));
}

}  // namespace placement::detail
