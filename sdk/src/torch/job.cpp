#include "placement/job.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <stdexcept>

#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include "device_sync.h"
#include "job_core.h"
#include "model_state.h"
#include "optimizer_state.h"
#include "overlapped_updates.h"
#include "physical_device.h"
#include "pinned_pool.h"
#include "placement/capture.h"
#include "placement/messages.h"
#include "placement/serialization.h"
#include "step_peers.h"
#include "transfer.h"
#include "update_guard.h"

#include "../hash.h"
#include "stopwatch.h"

namespace placement {

namespace {

using detail::Clock;
using detail::seconds_since;

// A step's overlapped updates hear of gradients while its forward and backward run, and only then.
class Overlapping {
 public:
  Overlapping(PlacedModule& placed, detail::OverlappedUpdates* updates)
      : placed_(placed), on_(updates != nullptr) {
    if (updates)
      placed.on_gradient_home([updates](const at::Tensor& p, const std::function<void()>& landed) {
        updates->ready(p, landed);
      });
  }
  ~Overlapping() {
    if (on_) placed_.on_gradient_home(nullptr);
  }
  Overlapping(const Overlapping&) = delete;
  Overlapping& operator=(const Overlapping&) = delete;

 private:
  PlacedModule& placed_;
  bool on_;
};

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : 8ull << 30;
}

// Copies the profiles of the graph in `path` into `graph`, which must be the same capture.
void adopt_profiles(OpGraph& graph, const std::string& path) {
  OpGraph profiled;
  try {
    profiled = load_graph_file(path);
  } catch (const std::exception& e) {
    throw std::invalid_argument("profile graph " + path + ": " + e.what());
  }
  if (profiled.fingerprint() != graph.fingerprint())
    throw std::invalid_argument(
        "profile graph " + path + " is not a capture of this model and these inputs (fingerprint " +
        profiled.fingerprint() + ", " + std::to_string(profiled.ops.size()) +
        " ops; this job's graph: " + graph.fingerprint() + ", " + std::to_string(graph.ops.size()) +
        " ops); capture it again");
  for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].profile = profiled.ops[i].profile;
}

// Refuses a start placement whose logical CPU devices cannot hold, within their limits, what
// lives there for the whole step: parameters at home with their gradients, persistent proxies,
// buffers. (The optimizer's state and the activations come on top; the step then fails as it
// would on a GPU.)
void refuse_what_cannot_fit(const OpGraph& graph, const DeviceSet& devices,
                            const Placement& placement, const std::vector<uint64_t>& limits) {
  std::vector<uint64_t> held(devices.size(), 0);
  std::vector<uint64_t> buffers(graph.ops.size(), 0);
  for (size_t op = 0; op < graph.ops.size(); ++op) buffers[op] = graph.ops[op].parameter_bytes;
  for (size_t k = 0; k < graph.parameters.size(); ++k) {
    const Parameter& p = graph.parameters[k];
    if (p.readers.empty()) continue;
    const size_t owner = static_cast<size_t>(p.readers.front());
    buffers[owner] -= std::min(buffers[owner], p.bytes);
    const int home = placement.home_of_parameter(graph, k);
    held[static_cast<size_t>(home)] += 2 * p.bytes;
    const int reader = placement.device_of_op[owner];
    const bool one_reader_device = std::all_of(p.readers.begin(), p.readers.end(), [&](int op) {
      return placement.device_of_op[static_cast<size_t>(op)] == reader;
    });
    const bool persistent = k >= placement.residence.parameters.size() ||
                            placement.residence.parameters[k].fetch == Fetch::kPersist;
    if (one_reader_device && reader != home && persistent)
      held[static_cast<size_t>(reader)] += p.bytes;
  }
  if (graph.parameters.empty())  // a graph without its table: every op's bytes where it runs
    for (size_t op = 0; op < graph.ops.size(); ++op)
      held[static_cast<size_t>(placement.device_of_op[op])] += 2 * graph.ops[op].parameter_bytes;
  else
    for (size_t op = 0; op < graph.ops.size(); ++op)
      held[static_cast<size_t>(placement.device_of_op[op])] += buffers[op];
  for (size_t d = 0; d < devices.size() && d < limits.size(); ++d) {
    if (limits[d] == 0 || devices.devices[d].kind != DeviceKind::kCpu || held[d] <= limits[d])
      continue;
    throw std::invalid_argument(
        "the start placement cannot fit " + devices.devices[d].name() + " (memory_limit_bytes " +
        std::to_string(limits[d]) +
        "): the parameters living there, their gradients and the "
        "copies kept for its ops alone take " +
        std::to_string(held[d]) +
        " bytes; home parameters elsewhere (start_residence) or raise the limit");
  }
}

// What the job says of itself when it attaches, made once: the channel sends it whole on every
// attach. A follower profiles nothing (rank 0's daemon places the group).
messages::Attach attach_message(const JobOptions& options, std::string name,
                                const detail::JobCore& core) {
  messages::Attach attach;
  attach.job = std::move(name);
  attach.devices = core.devices;
  attach.sdk_version = PLACEMENT_VERSION;
  attach.torch_version = TORCH_VERSION;
  attach.expected_steps = options.expected_steps;
  attach.profile_steps = core.leader() ? options.profile_steps : 0;
  if (core.group)
    attach.replica =
        messages::ReplicaInfo{core.group->rank(), core.group->size(), core.group->name()};
  return attach;
}

}  // namespace

DeviceSet job_devices(const std::vector<std::string>& names, uint64_t memory_bytes) {
  const std::vector<std::string> chosen =
      names.empty() ? std::vector<std::string>{"cpu:0", "cpu:1"} : names;
  size_t cpus = 0;
  std::vector<Device> list;
  for (const std::string& name : chosen) {
    list.push_back(parse_device_name(name));
    cpus += list.back().kind == DeviceKind::kCpu ? 1 : 0;
  }
  for (Device& d : list) {
    if (memory_bytes > 0) {
      d.memory_bytes = memory_bytes;
    } else if (d.kind == DeviceKind::kCpu) {
      d.memory_bytes = host_memory_bytes() / cpus;
    } else {
      std::optional<uint64_t> bytes;
      try {
        bytes = detail::cuda_memory_bytes(d.index);
      } catch (const std::exception& e) {
        throw std::invalid_argument("device " + d.name() + ": cannot read its memory (" + e.what() +
                                    ")");
      }
      if (!bytes)
        throw std::invalid_argument(
            "device " + d.name() +
            ": give its memory (JobOptions::memory_bytes); this build "
            "of libplacement_torch has no CUDA paths to read it from the device");
      d.memory_bytes = *bytes;
    }
  }
  DeviceSet set;
  set.devices = std::move(list);
  measure_links(set);
  return set;
}

Job::Job(std::string name, const torch::jit::Module& module,
         const std::vector<at::Tensor>& example_inputs, JobOptions options)
    : Job(std::move(name), Model::from_torchscript(module), example_inputs, std::move(options)) {}

Job::Job(std::string name, const Model& model, const std::vector<at::Tensor>& example_inputs,
         JobOptions options)
    : core_(std::make_unique<detail::JobCore>()) {
  detail::JobCore& core = *core_;
  core.graph = capture(model, example_inputs, name);
  if (!options.profile_graph_file.empty()) adopt_profiles(core.graph, options.profile_graph_file);
  core.devices = job_devices(options.devices, options.memory_bytes);
  for (const Device& d : core.devices.devices) core.any_cuda |= d.kind == DeviceKind::kCuda;
  core.placed = std::make_unique<PlacedModule>(model, core.graph, core.devices);
  if (options.profile_steps < 0) throw std::invalid_argument("profile_steps must be >= 0");
  core.profile_steps = options.profile_steps;
  if (options.guarded_updates < -1)
    throw std::invalid_argument("guarded_updates must be >= -1 (-1: every update)");
  core.guarded_updates = options.guarded_updates;
  core.overlap_updates = options.overlap_updates;
  core.host_pinned_option = options.host_pinned_bytes;
  core.host_pinned_applied = options.host_pinned_bytes > 0 ? options.host_pinned_bytes
                                                           : detail::default_host_pinned_bytes();
  detail::host_pool().set_limit(core.host_pinned_applied);
  const bool limited =
      std::any_of(options.memory_limit_bytes.begin(), options.memory_limit_bytes.end(),
                  [](uint64_t b) { return b > 0; });
  if (limited && options.memory_limit_bytes.size() > core.devices.size())
    throw std::invalid_argument("memory_limit_bytes has " +
                                std::to_string(options.memory_limit_bytes.size()) +
                                " entries for " + std::to_string(core.devices.size()) + " devices");
  Placement start = Placement::single(core.graph, 0);
  if (!options.start_device_of_op.empty()) start.device_of_op = options.start_device_of_op;
  start.residence = options.start_residence.is_default()
                        ? options.start_residence_rules.resolve(core.graph)
                        : options.start_residence;
  start.enforce_pins(core.graph, core.devices);
  try {
    start.validate(core.graph, core.devices);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("the start placement: ") + e.what());
  }
  if (limited) refuse_what_cannot_fit(core.graph, core.devices, start, options.memory_limit_bytes);
  core.placed->set_placement(start);
  if (limited) {
    if (!detail::MemoryTally::available())
      throw std::invalid_argument(
          "memory_limit_bytes: this process's host allocator cannot be counted (another "
          "allocator holds its slot)");
    core.memory = std::make_unique<detail::DeviceMemory>(*core.placed, options.memory_limit_bytes);
  }
  core.current.directive.placement = start;
  core.last_good = core.current;
  core.own = core.current;
  if (const std::optional<detail::ReplicaConfig> replicas =
          detail::replica_config(options.replicas))
    detail::join_replica_group(core, *replicas, start, model);
  else
    core.peers = detail::alone_peers();
  if (!options.use_daemon) return;
  JobChannelOptions channel;
  channel.socket_path = options.socket_path;
  channel.reconnect_interval_ms = options.reconnect_interval_ms;
  channel.attach = attach_message(options, std::move(name), core);
  // In a replica group rank 0's daemon decides: its directives hold for every rank. The other ranks
  // attach to their own daemons as followers, which show them and send them nothing.
  if (!core.leader()) {
    core.channel = std::make_unique<JobChannel>(std::move(channel));
    return;
  }
  channel.graph = core.graph;
  channel.start = start;
  core.channel = std::make_unique<JobChannel>(std::move(channel));
  // placementd's first directive names the start placement its measurements are filed under: when
  // it answers at once, the first step already counts; when it is not there, do not wait for it.
  core.channel->wait_for_directive(10000);
}

Job::~Job() = default;

std::unique_ptr<Job> attach(std::string name, const Model& model,
                            const std::vector<at::Tensor>& example_inputs, JobOptions options) {
  return std::make_unique<Job>(std::move(name), model, example_inputs, std::move(options));
}

std::unique_ptr<Job> attach(std::string name, const torch::jit::Module& module,
                            const std::vector<at::Tensor>& example_inputs, JobOptions options) {
  return std::make_unique<Job>(std::move(name), module, example_inputs, std::move(options));
}

std::vector<at::Tensor> Job::parameters() const { return core_->placed->parameters(); }

at::Tensor Job::step(const std::vector<c10::IValue>& inputs, const LossFunction& loss,
                     torch::optim::Optimizer& optimizer) {
  TorchStepOptimizer adapted(optimizer);
  return step(inputs, loss, adapted);
}

at::Tensor Job::step(const std::vector<c10::IValue>& inputs, const LossFunction& loss,
                     StepOptimizer& optimizer) {
  // The memory a step's forward and backward count (limits, peaks), ended however they end.
  struct CountedMemory {
    detail::JobCore& core;
    CountedMemory(detail::JobCore& c, StepOptimizer& optimizer) : core(c) {
      core.begin_memory(optimizer);
    }
    ~CountedMemory() { core.end_memory(); }
  };
  detail::JobCore& core = *core_;
  detail::StepPeers& peers = *core.peers;
  core.apply_pinned_budget();
  peers.boundary(core, optimizer);
  bool profiled = core.begin_profiled_step();
  // Under one of placementd's placements the batch may have to run again: what a failed attempt
  // changed besides the gradients (buffers, the random generators) is put back before it does.
  std::optional<detail::ModelState> before;
  if (core.current.directive.placement_id != 0)
    before.emplace(core.placed->model().named_buffers());
  const auto discard_gradients = [&] { core.placed->discard_gradients(); };
  // On GPUs alone, timed by events read a step later (gpu_step_clock.h); a profiled step waits for
  // its kernels, whose times the profiler reads.
  if (core.any_cuda && !core.group && !core.gpu_clock) {
    std::vector<c10::Device> gpus;
    for (const Device& d : core.devices.devices) {
      const c10::Device gpu = detail::physical(d);
      if (gpu.is_cuda() && std::find(gpus.begin(), gpus.end(), gpu) == gpus.end())
        gpus.push_back(gpu);
    }
    core.gpu_clock.emplace(std::move(gpus));
  }
  const bool by_events = core.gpu_clock && !profiled;
  if (by_events) core.gpu_clock->start();
  auto started = Clock::now();
  at::Tensor value;
  double update_seconds = 0.0;
  // The guard's copies of the attempt that ran: no part of the placement's step time.
  double guard_seconds = 0.0;
  bool updated = false;  // by a guarded update, in the loop
  std::optional<detail::OverlappedUpdates> overlapped;
  for (;;) {
    // What lives on the host is updated while the backward goes on, where the optimizer can step
    // parameters apart and no replica group has yet to sum the gradients; not in a profiled step,
    // whose op times would count the host's update running beside them.
    overlapped.reset();
    if (core.overlap_updates && !profiled && !core.group &&
        core.placed->sends_gradients_to_host() && optimizer.steps_parameters_apart())
      // Undoable where a failure is retried: under one of placementd's placements.
      overlapped.emplace(optimizer, core.current.directive.placement_id != 0);
    // An attempt's exception may hold its tensors (a Python traceback's frames): not kept through
    // the retry, which often follows an out-of-memory.
    std::exception_ptr error;
    std::string message;
    detail::StepFailure failure = detail::StepFailure::kNone;
    const auto caught = [&](detail::StepFailure how) {
      error = std::current_exception();
      failure = how;
      try {
        throw;
      } catch (const c10::Error& e) {
        message = e.what_without_backtrace();  // placementd's log wants the error, not a C++ stack
      } catch (const std::exception& e) {
        message = e.what();
      }
    };
    try {
      const CountedMemory counted(core, optimizer);
      const Overlapping overlapping(*core.placed, overlapped ? &*overlapped : nullptr);
      value = core.forward_backward(inputs, loss);
    } catch (const detail::LossFunctionError& e) {
      error = e.error;
      failure =
          e.interrupted ? detail::StepFailure::kInterrupted : detail::StepFailure::kLossFunction;
    } catch (const std::exception&) {
      caught(detail::StepFailure::kPlacement);
    }
    if (overlapped) {
      // The updates that ran while the backward went on: kept when it succeeded and all of them
      // did, else put back, so that the step ends, or runs again, as if none had run.
      try {
        overlapped->finish();
      } catch (const std::exception&) {
        if (failure == detail::StepFailure::kNone) caught(detail::StepFailure::kPlacement);
      }
      core.stats.overlapped_update_seconds += overlapped->seconds();
      if (failure != detail::StepFailure::kNone && overlapped->undo() > 0)
        ++core.stats.undone_updates;
    }
    if (failure != detail::StepFailure::kNone) {
      core.profiling.reset();  // nothing to profile, nor to retry under the profiler
      profiled = false;
    }
    const detail::StepAgreement agreed = peers.agree(core, failure);
    if (agreed.loss_error_rank) {
      // The user stops training, or the loss function failed as it would under the job's own
      // placement: the step ends as a plain loop's would, no retry, no update, nothing blamed on
      // the placement.
      discard_gradients();
      if (failure == detail::StepFailure::kLossFunction ||
          failure == detail::StepFailure::kInterrupted)
        std::rethrow_exception(error);
      const std::string rank = std::to_string(*agreed.loss_error_rank);
      if (agreed.interrupted) throw StepInterrupted("the step was interrupted on rank " + rank);
      throw std::runtime_error("the loss function failed on rank " + rank);
    }
    std::optional<int> failed_rank = agreed.failed_rank;
    if (!failed_rank) {
      if (profiled) {
        core.profiling->profiler->end_forward_backward();
        core.note_held(optimizer);
      }
      peers.reduce_gradients(core);
      // A parameter updated during the backward is skipped by the update of the rest, as every
      // optimizer that steps parameters apart skips one without a gradient.
      if (overlapped)
        for (const at::Tensor& p : overlapped->updated())
          at::Tensor(p).mutable_grad() = at::Tensor();
      // The first updates under one of placementd's placements run guarded: undone when they
      // fail, and the step retried on the last good placement.
      const bool guarded =
          core.current.directive.placement_id != 0 &&
          (core.guarded_updates < 0 ||
           core.updates_under_current < static_cast<uint64_t>(core.guarded_updates));
      if (!guarded) break;
      std::optional<detail::UpdateGuard> guard;
      try {
        const auto copying = Clock::now();
        if (by_events) core.gpu_clock->begin_excluded();
        guard.emplace(core.placed->parameters(), optimizer);
        if (by_events) core.gpu_clock->end_excluded();
        guard_seconds = seconds_since(copying);
        core.stats.guard_seconds += guard_seconds;
        // An optimizer that cannot save its state updates unguarded, after the exchange, which
        // every process of a group makes on the same steps.
        if (guard->armed()) {
          ++core.stats.guarded_updates;
          const auto update_started = Clock::now();
          optimizer.step();
          update_seconds = seconds_since(update_started);
          updated = true;
        }
      } catch (const StepInterrupted&) {
        caught(detail::StepFailure::kInterrupted);
      } catch (const std::exception&) {
        caught(detail::StepFailure::kPlacement);  // the copies before it too: host memory
      }
      const detail::UpdateAgreement update = peers.agree_update(core, failure);
      if (!update.failed_rank && !update.interrupted_rank) break;
      // Every process puts back what its update changed, whichever rank's failed.
      if (guard && guard->armed()) {
        guard->undo();
        ++core.stats.undone_updates;
      }
      if (overlapped && overlapped->undo() > 0 && !(guard && guard->armed()))
        ++core.stats.undone_updates;
      updated = false;
      core.profiling.reset();
      profiled = false;
      if (update.interrupted_rank) {
        discard_gradients();
        if (failure == detail::StepFailure::kInterrupted) std::rethrow_exception(error);
        throw StepInterrupted("the step was interrupted on rank " +
                              std::to_string(*update.interrupted_rank));
      }
      failed_rank = update.failed_rank;
      if (!error) message = "the update failed on rank " + std::to_string(*failed_rank);
    } else if (!error) {
      message = "the step failed on rank " + std::to_string(*failed_rank);
    }
    // This process's own error as it was thrown, or the rank's whose step failed.
    const auto fail = [&]() -> void {
      if (error) std::rethrow_exception(error);
      throw std::runtime_error(message);
    };
    // Only a placement placementd proposed is blamed; under the job's own it is the model's, and
    // the step ends as if it had not run: no update (those made during the backward were put
    // back), and no gradient left over for the next step to add to.
    if (core.current.directive.placement_id == 0) {
      discard_gradients();
      fail();
    }
    core.report(core.step_report(false, seconds_since(started), message));
    discard_gradients();
    before->restore();
    // Back to the last placement a step succeeded under; when that is the one failing now, to
    // the job's own.
    if (core.current.directive.placement_id == core.last_good.directive.placement_id &&
        core.current.generation == core.last_good.generation)
      core.last_good = core.own;
    core.current_ran = false;
    if (!core.switch_to(core.last_good, optimizer)) fail();
    profiled = false;  // another rank's failure left this one's profiling on; switch_to ended it
    ++core.stats.retried_steps;
    if (by_events) core.gpu_clock->start();
    started = Clock::now();
    guard_seconds = 0.0;
  }
  if (!updated) {
    const auto update_started = Clock::now();
    optimizer.step();
    update_seconds = seconds_since(update_started);
  }
  if (overlapped) core.stats.overlapped_updates += overlapped->updated().size();
  ++core.updates_under_current;
  const auto zeroing = Clock::now();
  optimizer.zero_grad();
  core.current_ran = true;
  if (by_events) {
    // This step's time is read at the end of the next, the last one's now: its kernels are done
    // or nearly, while this step's are queued behind them.
    detail::GpuStepClock::Measurement measured = core.gpu_clock->end();
    core.report_pending();
    core.pending_step =
        detail::JobCore::PendingStep{std::move(measured), core.step_report(true, 0.0)};
    ++core.stats.steps;
    return value.detach();
  }
  if (core.any_cuda) detail::synchronize_cuda_devices(core.devices);
  if (profiled) core.profiling->profiler->add_update(update_seconds + seconds_since(zeroing));
  const double seconds = seconds_since(started) - guard_seconds;
  peers.step_done(core, core.step_report(true, seconds, "", profiled));
  ++core.stats.steps;
  core.stats.last_step_s = seconds;
  if (profiled) core.end_profiled_step();
  return value.detach();
}

const Placement& Job::placement() const { return core_->placed->placement(); }
const OpGraph& Job::graph() const { return core_->graph; }
const DeviceSet& Job::devices() const { return core_->devices; }
PlacedModule& Job::module() { return *core_->placed; }

JobStats Job::stats() const {
  JobStats out = core_->stats;
  const messages::Directive& d = core_->current.directive;
  out.placement_id = d.placement_id;
  out.reason = d.placement_id == 0 ? "own" : messages::to_string(d.reason);
  out.state = d.placement_id == 0 ? "" : messages::to_string(d.state);
  if (core_->group) {
    out.rank = core_->group->rank();
    out.world_size = core_->group->size();
    out.replica_group = core_->group->name();
    out.collectives = core_->group->routes();
  }
  const detail::PinnedPoolStats pinned = detail::host_pool().stats();
  out.pinned_limit_bytes = pinned.limit_bytes;
  out.pinned_bytes = pinned.reserved_bytes;
  out.pinned_peak_bytes = pinned.peak_reserved_bytes;
  out.pinned_refusals = pinned.refusals;
  return out;
}

std::string parameters_digest(const std::vector<at::Tensor>& tensors) {
  detail::Fnv1a hash;
  for (const at::Tensor& t : tensors) {
    const at::Tensor bytes = t.detach().to(at::kCPU).contiguous();
    hash.add(std::string(static_cast<const char*>(bytes.data_ptr()),
                         bytes.numel() * bytes.element_size()));
  }
  return hash.hex();
}

JobChannel::Status Job::daemon() const {
  return core_->channel ? core_->channel->status() : JobChannel::Status{};
}

messages::JobInfo Job::placementd_view() const {
  if (!core_->channel) throw std::runtime_error("the job runs without placementd (use_daemon off)");
  return core_->channel->show();
}

JobChannel::Status Job::detach() {
  core_->report_pending();  // the last step's time, before the channel closes
  return core_->channel ? core_->channel->close() : JobChannel::Status{};
}

}  // namespace placement
