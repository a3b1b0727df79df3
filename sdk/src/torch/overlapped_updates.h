#pragma once
// Optimizer updates run while the backward goes on. A parameter that lives on the host and is
// read through a proxy on another device (residence, placement.h) gets its whole gradient at
// home from the proxy's hook once autograd has summed it; from then on nothing in the backward
// reads the parameter, so its update can run at once, on a thread of its own, while autograd
// computes the rest (what DeepSpeed's users ask for as "fuse cpuadam with backward"). Updates
// run in batches of whatever has arrived, through StepOptimizer::step_parameters.
//
// Where the step may have to run again (under one of placementd's placements, whose failures are
// retried on the last good one), each batch is saved first (UpdateGuard: host copies of the values
// and the optimizer's state), so that a failure anywhere later in the step (the backward's, a
// later batch's, the update of the rest) puts every one back and the step runs again as if none
// had run. The copies take the host longer than a fused Adam update of the same parameters, and
// hold their bytes and their state's once more until the step ends; where no retry follows a
// failure (the job's own placement, whose failures are the caller's) they are not made, and a
// failure leaves what was updated, as a failing optimizer.step() does. Private to
// libplacement_torch; Job::step drives it.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

#include "placement/step_optimizer.h"
#include "update_guard.h"

namespace placement::detail {

class OverlappedUpdates {
 public:
  /// `optimizer` must step parameters apart (StepOptimizer::steps_parameters_apart). `undoable`:
  /// save each batch first, so that undo() can put it back.
  OverlappedUpdates(StepOptimizer& optimizer, bool undoable);
  /// Waits for the thread; what ran stays as it is (finish() and undo() decide before).
  ~OverlappedUpdates();
  OverlappedUpdates(const OverlappedUpdates&) = delete;
  OverlappedUpdates& operator=(const OverlappedUpdates&) = delete;

  /// `parameter`'s gradient is complete and on its way to its home on the host: queues its
  /// update, which first calls `landed` (if any), which returns once the gradient is there. Any
  /// thread.
  void ready(const at::Tensor& parameter, std::function<void()> landed = {});
  /// Waits until every queued update has run. Rethrows the first that failed (undoable: that batch
  /// is already put back; after it none more ran, and their parameters keep their gradients).
  void finish();
  /// Undoable: waits as finish() does and puts back every update that ran, newest first (copies
  /// into the tensors that exist). Returns how many parameters were put back, those of a batch
  /// that failed (already put back) among them.
  size_t undo();
  /// The parameters updated, in the order they were (their gradients are spent).
  const std::vector<at::Tensor>& updated() const { return updated_; }
  /// What the thread spent saving and updating, and what the saves hold.
  double seconds() const { return seconds_; }
  uint64_t saved_bytes() const { return saved_bytes_; }

 private:
  void run();

  StepOptimizer& optimizer_;
  const bool undoable_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::vector<at::Tensor> queue_;
  std::vector<std::function<void()>> landing_;  // per queued parameter
  bool busy_ = false;
  bool closing_ = false;
  std::exception_ptr error_;
  // The thread's own until finish() has seen it idle.
  std::vector<UpdateGuard> guards_;
  std::vector<at::Tensor> updated_;
  size_t failed_put_back_ = 0;
  double seconds_ = 0.0;
  uint64_t saved_bytes_ = 0;
  std::thread thread_;
};

}  // namespace placement::detail
