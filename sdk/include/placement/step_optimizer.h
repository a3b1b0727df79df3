#pragma once
// The optimizer interface Job::step drives, in a header of its own so that the SDK's parts that
// update, guard or count an optimizer's state need not include the job API above them.
// LibTorch types are only forward-declared here.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "placement/torch_fwd.h"

namespace placement {

/// The optimizer as Job::step drives it, for one that is not a torch::optim optimizer (the Python
/// module adapts torch.optim ones): its update, clearing the gradients, and moving the state of
/// parameters that moved (moments, momentum buffers) next to them.
class StepOptimizer {
 public:
  virtual ~StepOptimizer() = default;
  virtual void step() = 0;
  virtual void zero_grad() = 0;
  /// After a placement change, parameters[i] lives on devices[i]: moves their state there, all or
  /// nothing (on failure it throws and leaves the state as it was). Returns the bytes moved.
  virtual uint64_t move_state(const std::vector<at::Tensor>& parameters,
                              const std::vector<c10::Device>& devices) = 0;

  /// The state's copies, made and not yet installed.
  struct StagedState {
    /// Installs the copies in place of the state: must not fail.
    std::function<void()> install;
    uint64_t bytes = 0;
  };
  /// move_state in two halves: copies the state of parameters[i] to devices[i] (throwing, with
  /// nothing changed, when a copy fails) and returns what installs the copies. With it a swap is
  /// all or nothing together with the parameters' move, and in a replica group on every rank or
  /// none. nullopt (the default) when the optimizer cannot: move_state then runs where the copies
  /// would be installed, so a failure there in a group leaves the others to move back.
  virtual std::optional<StagedState> stage_state(const std::vector<at::Tensor>& parameters,
                                                 const std::vector<c10::Device>& devices) {
    (void)parameters;
    (void)devices;
    return std::nullopt;
  }
  /// The state tensors of each of `parameters` (moments, momentum buffers), so that what a
  /// device holds can be counted; the default, for an optimizer that cannot tell: none.
  virtual std::vector<std::vector<at::Tensor>> state_tensors(
      const std::vector<at::Tensor>& parameters);

  /// The bytes of state the optimizer keeps for `parameter` once it has stepped it (Adam's two
  /// moments: twice the parameter's bytes; 0 for a parameter it does not update), so that a
  /// device's memory limit can refuse a placement before the first update makes the state;
  /// nullopt (the default) when the optimizer cannot tell.
  virtual std::optional<uint64_t> expected_state_bytes(const at::Tensor& parameter) {
    (void)parameter;
    return std::nullopt;
  }

  /// Whether step_parameters() may update some parameters apart from the rest: true only for an
  /// optimizer known to update each parameter from its own value, gradient and state alone (no
  /// norm over all gradients, no closure), so that stepping them in parts is bit for bit one
  /// step. Then Job::step updates a parameter that lives on the host as soon as its gradient is
  /// there, while the backward goes on. False (the default): one step() after the backward.
  virtual bool steps_parameters_apart() const { return false; }
  /// Steps only `parameters` (some of the optimizer's, each with its gradient), with their
  /// groups' options, exactly as step() would step them. Called only when
  /// steps_parameters_apart(); may run on another thread than step() while the backward goes on,
  /// never at the same time as another of the optimizer's calls.
  virtual void step_parameters(const std::vector<at::Tensor>& parameters);

  /// A copy, in host memory, of what step() changes of `parameters`' state besides their values
  /// (moments, step counts, state it creates), and what puts it back.
  struct SavedState {
    /// Puts the state back as it was when saved, in place (the state's tensors stay the same
    /// tensors, on their devices), and drops what step() created since.
    std::function<void()> restore;
    uint64_t bytes = 0;
  };
  /// Saves the state of `parameters` before a guarded update (JobOptions::guarded_updates).
  /// nullopt (the default) when the optimizer cannot: its updates then run unguarded.
  virtual std::optional<SavedState> save_state(const std::vector<at::Tensor>& parameters) {
    (void)parameters;
    return std::nullopt;
  }
};

}  // namespace placement
