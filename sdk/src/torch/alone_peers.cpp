// A process alone: the directive placementd sent is applied at the boundary, a failure is this
// process's, its gradients are its own and its time is placementd's measurement.

#include "job_core.h"
#include "step_peers.h"

namespace placement::detail {
namespace {

class AlonePeers final : public StepPeers {
 public:
  void boundary(JobCore& job, StepOptimizer& optimizer) override {
    if (!job.channel) return;
    if (std::optional<ReceivedDirective> d = job.channel->take_directive())
      job.switch_to(std::move(*d), optimizer);
  }
  StepAgreement agree(JobCore&, StepFailure failure) override {
    StepAgreement out;
    if (failure == StepFailure::kPlacement) out.failed_rank = 0;
    if (failure == StepFailure::kLossFunction || failure == StepFailure::kInterrupted)
      out.loss_error_rank = 0;
    out.interrupted = failure == StepFailure::kInterrupted;
    return out;
  }
  void reduce_gradients(JobCore&) override {}
  UpdateAgreement agree_update(JobCore&, StepFailure failure) override {
    UpdateAgreement out;
    if (failure == StepFailure::kPlacement) out.failed_rank = 0;
    if (failure == StepFailure::kInterrupted) out.interrupted_rank = 0;
    return out;
  }
  void step_done(JobCore& job, const ReportedStep& step) override { job.report(step); }
};

}  // namespace

std::unique_ptr<StepPeers> alone_peers() { return std::make_unique<AlonePeers>(); }

}  // namespace placement::detail
