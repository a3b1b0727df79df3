#include "job_core.h"

#include <algorithm>
#include <unordered_set>

#include <ATen/DeviceAccelerator.h>

#include "pinned_pool.h"
#include "step_peers.h"
#include "stopwatch.h"
#include "tensor_bytes.h"

namespace placement::detail {

namespace {

// What of an error a report carries: a Python traceback can run to megabytes, and placementd
// keeps a few KiB of it anyway (StepReport::kMaxError).
std::string reported(const std::string& error) {
  constexpr size_t kKept = messages::StepReport::kMaxError - 32;
  if (error.size() <= messages::StepReport::kMaxError) return error;
  return error.substr(0, kKept) + " [" + std::to_string(error.size() - kKept) + " more bytes]";
}

}  // namespace

JobCore::JobCore() = default;
JobCore::~JobCore() {
  try {
    report_pending();
  } catch (...) {
    // A GPU that failed under the last step fails nothing more here.
  }
}

void JobCore::report_pending() {
  if (!pending_step) return;
  PendingStep p = std::move(*pending_step);
  pending_step.reset();
  try {
    p.report.step.step_time_s = std::max(0.0, p.measured.seconds());
    stats.last_step_s = p.report.step.step_time_s;
  } catch (const std::exception& e) {
    // The GPU failed under that step after all (an error its kernels raised late): said so, not
    // lost; the step at hand meets the same error itself.
    p.report.step.ok = false;
    p.report.step.step_time_s = 0.0;
    p.report.step.error = reported(e.what());
  }
  report(p.report);
}

bool JobCore::profiles_on_their_way(const InForce& target) const {
  if (target.generation != sent_generation) return false;
  const std::vector<int>& device_of_op = target.directive.placement.device_of_op;
  if (device_of_op.size() != sent_kinds_of_op.size()) return false;
  for (size_t op = 0; op < device_of_op.size(); ++op)
    if (!sent_kinds_of_op[op].count(devices.devices[static_cast<size_t>(device_of_op[op])].kind))
      return false;
  return true;
}

void JobCore::note_profiles_sent(const InForce& measured) {
  const std::vector<int>& device_of_op = measured.directive.placement.device_of_op;
  if (measured.generation != sent_generation || sent_kinds_of_op.size() != device_of_op.size())
    sent_kinds_of_op.assign(device_of_op.size(), {});
  sent_generation = measured.generation;
  for (size_t op = 0; op < device_of_op.size(); ++op)
    sent_kinds_of_op[op].insert(devices.devices[static_cast<size_t>(device_of_op[op])].kind);
}

bool JobCore::switch_to(InForce target, StepOptimizer& optimizer) {
  std::optional<StagedMove> staged = stage_switch(target, optimizer);
  return staged && commit_switch(std::move(target), optimizer, std::move(*staged));
}

std::optional<StagedMove> JobCore::stage_switch(const InForce& target, StepOptimizer& optimizer) {
  const auto started = Clock::now();
  try {
    StagedMove staged = stage_with_state(*placed, optimizer, target.directive.placement);
    staged.seconds = seconds_since(started);  // counted once the swap happens
    return staged;
  } catch (const std::exception& e) {
    swap_failed(target, std::string("migration: ") + e.what());
    return std::nullopt;
  }
}

bool JobCore::commit_switch(InForce target, StepOptimizer& optimizer, StagedMove staged) {
  const auto started = Clock::now();
  const double staging = staged.seconds;
  try {
    const PlacementMove moved = commit(*placed, optimizer, std::move(staged));
    stats.migrated_bytes += moved.module.bytes + moved.state_bytes;
  } catch (const std::exception& e) {
    swap_failed(target, std::string("migration: ") + e.what());
    return false;
  }
  stats.migration_seconds += staging + seconds_since(started);
  ++stats.swaps;
  if (current_ran) last_good = current;
  profiling.reset();
  if (target.directive.profile && profile_steps > 0 && !profiles_on_their_way(target))
    profiling = Profiling{target.directive.placement_id, 1, nullptr, {}, {}};
  current = std::move(target);
  current_ran = false;
  updates_under_current = 0;
  return true;
}

void JobCore::swap_failed(const InForce& target, const std::string& error) {
  ++stats.failed_swaps;
  if (channel && leader() && target.directive.placement_id != 0) {
    ReportedStep failed = step_report(false, 0.0, error);
    failed.generation = target.generation;
    failed.step.placement_id = target.directive.placement_id;
    report(failed);
  }
}

std::vector<c10::Device> devices_of(const std::vector<c10::IValue>& outputs) {
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& value : outputs) tensors_in(value, tensors);
  std::vector<c10::Device> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors)
    if (t.defined()) out.push_back(t.device());
  return out;
}

bool loss_error_is_the_users(const std::exception_ptr& error,
                             const std::vector<c10::Device>& outputs,
                             const std::optional<std::vector<c10::Device>>& own) {
  try {
    std::rethrow_exception(error);
  } catch (const StepInterrupted&) {
    return true;
  } catch (const c10::OutOfMemoryError&) {
    return false;  // the placement's memory, also when the loss is what runs out of it
  } catch (const c10::AcceleratorError&) {
    return false;
  } catch (...) {
    return own && *own == outputs;
  }
}

void JobCore::apply_pinned_budget() {
  const uint64_t said = channel ? channel->host_pinned_bytes() : 0;
  if (said == 0) return;  // placementd has not said (yet): the job's own figure holds
  const uint64_t budget = host_pinned_option > 0 ? std::min(host_pinned_option, said) : said;
  if (budget == host_pinned_applied) return;
  host_pinned_applied = budget;
  host_pool().set_limit(budget);
}

void JobCore::begin_memory(StepOptimizer& optimizer) {
  if (memory) memory->begin_step(optimizer);
  if (!any_cuda) return;
  for (const Device& d : devices.devices)
    if (d.kind == DeviceKind::kCuda)
      at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(d.index));
}

void JobCore::end_memory() {
  std::vector<uint64_t> peaks = memory ? memory->peaks() : std::vector<uint64_t>();
  if (memory) memory->end_step();
  if (!memory && !any_cuda) return;
  peaks.resize(devices.size(), 0);
  if (any_cuda)
    for (size_t i = 0; i < devices.size(); ++i) {
      const Device& d = devices.devices[i];
      if (d.kind != DeviceKind::kCuda) continue;
      const auto stats = at::accelerator::getDeviceStats(static_cast<c10::DeviceIndex>(d.index));
      peaks[i] = static_cast<uint64_t>(
          stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
              .peak);
    }
  stats.peak_bytes = std::move(peaks);
}

at::Tensor JobCore::forward_backward(const std::vector<c10::IValue>& inputs,
                                     const LossFunction& loss_fn) {
  // What the backward's hooks make current on this thread for counting is put back after it.
  const MemoryTally::Scope counting(nullptr, -1);
  // What the residence copies aside lands before the step goes on: its gradients are read on the
  // host next, or dropped with a failed step's (whose memory a copy in flight would still write).
  struct Settle {
    PlacedModule& placed;
    bool done = false;
    ~Settle() {
      if (done) return;
      try {
        placed.settle_copies();
      } catch (...) {
        // The step is failing already, with its own error.
      }
    }
  } settle{*placed};
  std::vector<c10::IValue> outputs = placed->forward(inputs);
  std::vector<c10::Device> output_devices = devices_of(outputs);
  if (!own_output_devices &&
      placed->placement().device_of_op == own.directive.placement.device_of_op)
    own_output_devices = output_devices;
  at::Tensor loss;
  try {
    loss = loss_fn(outputs);
  } catch (const StepInterrupted&) {
    throw LossFunctionError{std::current_exception(), true};
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    if (loss_error_is_the_users(error, output_devices, own_output_devices))
      throw LossFunctionError{error, false};
    throw;
  }
  // The outputs go before the backward, as an eager loop's do once its loss is computed: the
  // model's last output is often the step's largest tensor (a language model's logits, 206 MB for
  // GPT-2 at batch 8 x 128), and the backward's gradients then take its memory instead of fresh
  // pages (docs/benchmarks.md, issue #40). What the loss needs of them autograd holds.
  outputs.clear();
  loss.backward();
  settle.done = true;
  placed->settle_copies();
  return loss;
}

ReportedStep JobCore::step_report(bool ok, double seconds, const std::string& error,
                                  bool profiled) const {
  ReportedStep out;
  out.generation = current.generation;
  out.step.placement_id = current.directive.placement_id;
  out.step.step = stats.steps;
  out.step.step_time_s = seconds;
  out.step.ok = ok;
  out.step.error = reported(error);
  out.step.profiled = profiled;
  return out;
}

void JobCore::report(const ReportedStep& step) {
  report_pending();
  if (!channel || (step.step.placement_id == 0 && leader())) return;
  channel->report(step.generation, step.step);
}

bool JobCore::begin_profiled_step() {
  if (!profiling || profiling->placement_id != current.directive.placement_id) return false;
  if (profiling->warmup_left > 0) {
    --profiling->warmup_left;
    return false;
  }
  if (!profiling->profiler) profiling->profiler = std::make_unique<StepProfiler>(*placed);
  return true;
}

void JobCore::note_held(StepOptimizer& optimizer) {
  std::vector<messages::HeldBytes> now(devices.size());
  const auto at = [&](int device) -> messages::HeldBytes* {
    return device >= 0 && static_cast<size_t>(device) < now.size()
               ? &now[static_cast<size_t>(device)]
               : nullptr;
  };
  std::unordered_set<const c10::TensorImpl*> own;  // parameters and buffers, not copies
  std::vector<at::Tensor> parameters;
  std::vector<int> homes;
  for (const at::Tensor& p : placed->parameters()) {
    own.insert(p.unsafeGetTensorImpl());
    const std::optional<int> home = placed->device_of(p);
    messages::HeldBytes* h = at(home.value_or(-1));
    if (!h) continue;
    h->parameters += p.nbytes();
    if (p.grad().defined()) h->gradients += p.grad().nbytes();
    parameters.push_back(p);
    homes.push_back(*home);
  }
  const std::vector<std::vector<at::Tensor>> state = optimizer.state_tensors(parameters);
  for (size_t i = 0; i < state.size() && i < homes.size(); ++i)
    for (const at::Tensor& t : state[i]) at(homes[i])->optimizer_state += t.nbytes();
  for (const auto& [name, b] : placed->model().named_buffers()) {
    own.insert(b.unsafeGetTensorImpl());
    if (messages::HeldBytes* h = at(placed->device_of(b).value_or(-1))) h->buffers += b.nbytes();
  }
  // The rest of what the module holds are its copies of parameters for their readers (an
  // emptied one holds nothing).
  for (const auto& [t, device] : placed->held_tensors())
    if (!own.count(t.unsafeGetTensorImpl()) && t.has_storage())
      if (messages::HeldBytes* h = at(device)) h->copies += t.storage().nbytes();
  std::vector<messages::HeldBytes>& held = profiling->held;
  held.resize(now.size());
  for (size_t d = 0; d < now.size(); ++d) {
    messages::HeldBytes& m = held[d];
    m.parameters = std::max(m.parameters, now[d].parameters);
    m.buffers = std::max(m.buffers, now[d].buffers);
    m.gradients = std::max(m.gradients, now[d].gradients);
    m.optimizer_state = std::max(m.optimizer_state, now[d].optimizer_state);
    m.copies = std::max(m.copies, now[d].copies);
  }
}

void JobCore::end_profiled_step() {
  ++stats.profiled_steps;
  std::vector<uint64_t>& peaks = profiling->peaks;
  if (peaks.size() < stats.peak_bytes.size()) peaks.resize(stats.peak_bytes.size(), 0);
  for (size_t d = 0; d < stats.peak_bytes.size(); ++d)
    peaks[d] = std::max(peaks[d], stats.peak_bytes[d]);
  if (profiling->profiler->steps() < profile_steps) return;
  const std::vector<OpProfile> profiles = profiling->profiler->profiles();
  messages::ProfileReport out;
  out.placement_id = profiling->placement_id;
  out.steps = static_cast<uint64_t>(profile_steps);
  for (size_t i = 0; i < profiles.size(); ++i)
    out.ops.push_back({static_cast<int>(i),
                       to_string(devices.devices[current.directive.placement.device_of_op[i]].kind),
                       profiles[i]});
  out.peak_bytes = std::move(peaks);
  // Each op's kept outputs where they wait for its backward under the placement's residence.
  std::vector<messages::HeldBytes> held = std::move(profiling->held);
  const Placement& placement = current.directive.placement;
  if (!held.empty())
    for (size_t i = 0; i < profiles.size(); ++i) {
      const ActivationResidence a = i < placement.residence.activations.size()
                                        ? placement.residence.activations[i]
                                        : ActivationResidence{};
      if (a.policy == ActivationPolicy::kRecompute) continue;
      const int device =
          a.policy == ActivationPolicy::kOffload ? a.device : placement.device_of_op[i];
      if (device >= 0 && static_cast<size_t>(device) < held.size())
        held[static_cast<size_t>(device)].activations += profiles[i].activation_bytes;
    }
  out.held_bytes = std::move(held);
  profiling.reset();
  out.apply(graph);
  note_profiles_sent(current);
  if (channel) channel->send_profiles(current.generation, std::move(out));
  ++stats.profiles_sent;
}

std::vector<int> JobCore::slots_of(const std::vector<at::Tensor>& tensors) const {
  std::vector<int> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(placed->device_of(t).value_or(-1));
  return out;
}

}  // namespace placement::detail
