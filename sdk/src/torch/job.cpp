#include "placement/job.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <optional>
#include <set>

#include <torch/csrc/jit/api/module.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "device_sync.h"
#include "memory_limit.h"
#include "optimizer_state.h"
#include "replica_group.h"
#include "step_profiler.h"
#include "transfer.h"
#include "placement/capture.h"
#include "placement/messages.h"
#include "placement/serialization.h"

#include "../hash.h"
#include "stopwatch.h"

namespace placement {

namespace {

using detail::Clock;
using detail::seconds_since;

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 8ull << 30;
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
    throw std::invalid_argument("profile graph " + path + " is not a capture of this model and these inputs (fingerprint " +
                                profiled.fingerprint() + ", " + std::to_string(profiled.ops.size()) +
                                " ops; this job's graph: " + graph.fingerprint() + ", " +
                                std::to_string(graph.ops.size()) + " ops); capture it again");
  for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].profile = profiled.ops[i].profile;
}

}  // namespace

DeviceSet job_devices(const std::vector<std::string>& names, uint64_t memory_bytes) {
  const std::vector<std::string> chosen = names.empty() ? std::vector<std::string>{"cpu:0", "cpu:1"} : names;
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
        throw std::invalid_argument("device " + d.name() + ": cannot read its memory (" + e.what() + ")");
      }
      if (!bytes)
        throw std::invalid_argument("device " + d.name() + ": give its memory (JobOptions::memory_bytes); this build "
                                    "of libplacement_torch has no CUDA paths to read it from the device");
      d.memory_bytes = *bytes;
    }
  }
  DeviceSet set;
  set.devices = std::move(list);
  measure_links(set);
  return set;
}

struct Job::Impl {
  // Placement id 0 is the job's own placement, not one of placementd's.
  using InForce = ReceivedDirective;
  // Profiling placementd asked for: steps under `placement_id`, after `warmup_left` plain ones.
  struct Profiling {
    uint64_t placement_id = 0;
    int warmup_left = 1;
    std::unique_ptr<detail::StepProfiler> profiler;
  };

  OpGraph graph;
  DeviceSet devices;
  std::unique_ptr<PlacedModule> placed;
  std::unique_ptr<detail::DeviceMemoryLimit> memory_limit;
  std::unique_ptr<JobChannel> channel;
  bool any_cuda = false;
  InForce current;
  bool current_ran = false;  // a step succeeded under `current`
  // Where a failing placementd placement falls back to: the last one a step succeeded under, and
  // before any did, the job's own (a failure under that is the model's, not placementd's).
  InForce last_good;
  JobStats stats;
  int profile_steps = 0;
  std::optional<Profiling> profiling;
  // The device kinds whose profiles this job sent in attachment `sent_generation`. placementd
  // decides on a directive when a step report arrives, which may be before the profiles measured
  // ahead of it: a request for kinds already on their way to the same session is not run again.
  uint64_t sent_generation = 0;
  std::set<DeviceKind> sent_kinds;
  // Data-parallel replicas: the group, and the step whose time goes to placementd after the next
  // step's exchange, once the slowest rank's time is known.
  std::unique_ptr<detail::ReplicaGroup> group;
  struct PendingReport {
    uint64_t step = 0;
    double seconds = 0.0;
    bool profiled = false;
  };
  std::optional<PendingReport> pending_report;
  // A directive rank 0 took and offered in a step's exchange, and whether one is due at the next
  // boundary (every rank knows that from the exchange).
  std::optional<ReceivedDirective> held;
  bool directive_due = false;

  bool profiles_on_their_way(const InForce& target) const {
    if (target.generation != sent_generation) return false;
    return std::all_of(target.directive.placement.device_of_op.begin(), target.directive.placement.device_of_op.end(),
                       [&](int d) { return sent_kinds.count(devices.devices[static_cast<size_t>(d)].kind) > 0; });
  }

  // Moves the module and the optimizer's state to `target`; on failure everything stays as it was.
  bool switch_to(InForce target, StepOptimizer& optimizer) {
    const auto started = Clock::now();
    const Placement before = placed->placement();
    const ParameterHomes homes_before = parameter_homes(*placed);
    try {
      const MigrationStats moved = placed->set_placement(target.directive.placement);
      try {
        stats.migrated_bytes += migrate_optimizer_state(optimizer, *placed, homes_before);
      } catch (...) {
        placed->set_placement(before);
        throw;
      }
      stats.migrated_bytes += moved.bytes;
    } catch (const std::exception& e) {
      ++stats.failed_swaps;
      if (channel && leader() && target.directive.placement_id != 0)
        channel->report(target.generation,
                        {target.directive.placement_id, stats.steps, 0.0, false, std::string("migration: ") + e.what()});
      return false;
    }
    stats.migration_seconds += seconds_since(started);
    ++stats.swaps;
    if (current_ran) last_good = current;
    profiling.reset();
    if (target.directive.profile && profile_steps > 0 && !profiles_on_their_way(target))
      profiling = Profiling{target.directive.placement_id, 1, nullptr};
    current = std::move(target);
    current_ran = false;
    return true;
  }

  at::Tensor forward_backward(const std::vector<c10::IValue>& inputs, const LossFunction& loss_fn) {
    if (memory_limit) memory_limit->begin_forward();
    const std::vector<c10::IValue> outputs = placed->forward(inputs);
    at::Tensor loss = loss_fn(outputs);
    loss.backward();
    return loss;
  }

  // A follower reports every step to its own daemon, which only shows them; rank 0 reports the
  // steps under placementd's placements, which reward them.
  void report(bool ok, double seconds, const std::string& error, bool profiled = false) {
    if (channel && (current.directive.placement_id != 0 || !leader()))
      channel->report(current.generation, {current.directive.placement_id, stats.steps, seconds, ok, error, profiled});
  }

  // Whether this step runs under the profiler (starting it on the first such step).
  bool begin_profiled_step() {
    if (!profiling || profiling->placement_id != current.directive.placement_id) return false;
    if (profiling->warmup_left > 0) {
      --profiling->warmup_left;
      return false;
    }
    if (!profiling->profiler) profiling->profiler = std::make_unique<detail::StepProfiler>(*placed, memory_limit.get());
    return true;
  }

  // After a profiled step: once enough are measured, the ops' medians go to placementd, each for
  // the kind of device the op ran on, and into this job's graph.
  void end_profiled_step() {
    ++stats.profiled_steps;
    if (profiling->profiler->steps() < profile_steps) return;
    const std::vector<OpProfile> profiles = profiling->profiler->profiles();
    ProfileReport out;
    out.placement_id = profiling->placement_id;
    out.steps = static_cast<uint64_t>(profile_steps);
    for (size_t i = 0; i < profiles.size(); ++i)
      out.ops.push_back({static_cast<int>(i), to_string(devices.devices[current.directive.placement.device_of_op[i]].kind), profiles[i]});
    profiling.reset();
    out.apply(graph);
    if (current.generation != sent_generation) sent_kinds.clear();
    sent_generation = current.generation;
    for (int d : current.directive.placement.device_of_op) sent_kinds.insert(devices.devices[static_cast<size_t>(d)].kind);
    if (channel) channel->send_profiles(current.generation, std::move(out));
    ++stats.profiles_sent;
  }

  bool leader() const { return !group || group->rank() == 0; }

  // The job's device each tensor lives on (-1: none), which pairs it with the other ranks' copy.
  std::vector<int> slots_of(const std::vector<at::Tensor>& tensors) const {
    std::vector<int> out;
    out.reserve(tensors.size());
    for (const at::Tensor& t : tensors) out.push_back(placed->device_of(t).value_or(-1));
    return out;
  }

  // The step boundary of a replica group: the directive rank 0 offered in the step before is
  // applied by every rank, or by none.
  void group_boundary(StepOptimizer& optimizer) {
    if (!directive_due) return;
    directive_due = false;
    std::optional<ReceivedDirective> offered = std::move(held);
    held.reset();
    const std::string sent = group->broadcast(offered ? offered->directive.to_json(devices).dump() : std::string());
    ReceivedDirective target;
    if (offered) {
      target = std::move(*offered);
    } else {
      target.directive = messages::Directive::from_json(nlohmann::json::parse(sent), graph, devices);
      target.directive.profile = false;  // rank 0 profiles for placementd
    }
    const InForce before = current;
    const bool moved = switch_to(target, optimizer);
    const int failed_rank = static_cast<int>(group->max({moved ? 0.0 : group->rank() + 1.0})[0]) - 1;
    if (failed_rank < 0) return;
    if (moved) {
      switch_to(before, optimizer);
      ++stats.failed_swaps;
      if (channel && leader())
        channel->report(target.generation, {target.directive.placement_id, stats.steps, 0.0, false,
                                            "migration failed on rank " + std::to_string(failed_rank)});
    }
  }

  at::Tensor group_step(const std::vector<c10::IValue>& inputs, const LossFunction& loss_fn, StepOptimizer& optimizer) {
    group_boundary(optimizer);
    bool profiled = begin_profiled_step();
    auto started = Clock::now();
    at::Tensor value;
    std::string error;
    try {
      value = forward_backward(inputs, loss_fn);
    } catch (const std::exception& e) {
      error = e.what();
      profiling.reset();
      profiled = false;
    }
    // One small exchange a step, after backward (a plain data-parallel loop has none; the
    // gradients' buckets follow): whether any rank failed (all retry with it); whether rank 0
    // offers a directive (every rank applies it at the next boundary); the slowest rank's time of
    // the step before (placementd's measurement); which parameters any rank's step reached. A
    // parameter none reached keeps no gradient, so the optimizer skips it as in one process; one
    // that some reached counts as zeros on the others.
    if (channel && !held) held = channel->take_directive();
    const std::vector<at::Tensor> parameters = placed->parameters();
    const auto exchange = [&](bool failed) {
      std::vector<double> v = {failed ? group->rank() + 1.0 : 0.0, held ? 1.0 : 0.0,
                               pending_report ? pending_report->seconds : 0.0};
      for (const at::Tensor& p : parameters) v.push_back(p.grad().defined() ? 1.0 : 0.0);
      return group->max(v);
    };
    std::vector<double> agreed = exchange(!error.empty());
    directive_due = agreed[1] > 0.0;
    if (pending_report && channel && current.directive.placement_id != 0)
      channel->report(current.generation, {current.directive.placement_id, pending_report->step, agreed[2], true, "",
                                           pending_report->profiled});
    pending_report.reset();
    const int failed_rank = static_cast<int>(agreed[0]) - 1;
    if (failed_rank >= 0) {
      const std::string what = error.empty() ? "the step failed on rank " + std::to_string(failed_rank) : error;
      if (current.directive.placement_id == 0) throw std::runtime_error(what);
      report(false, seconds_since(started), what);
      for (at::Tensor& p : placed->parameters()) p.mutable_grad() = at::Tensor();
      current_ran = false;
      if (!switch_to(last_good, optimizer)) throw std::runtime_error(what);
      ++stats.retried_steps;
      started = Clock::now();
      value = forward_backward(inputs, loss_fn);
      agreed = exchange(false);
    }
    constexpr size_t kReachedAt = 3;
    if (profiled) profiling->profiler->end_forward_backward();
    // Backward's kernels end first, so that allreduce_seconds is the exchange's own time.
    if (any_cuda) detail::synchronize_cuda_devices(devices);
    const auto allreduce_started = Clock::now();
    std::vector<at::Tensor> reached;
    for (size_t i = 0; i < parameters.size(); ++i)
      if (agreed[kReachedAt + i] > 0.0) reached.push_back(parameters[i]);
    group->average_gradients(reached, slots_of(reached));
    stats.allreduce_seconds += seconds_since(allreduce_started);
    const auto update_started = Clock::now();
    optimizer.step();
    optimizer.zero_grad();
    if (any_cuda) detail::synchronize_cuda_devices(devices);
    if (profiled) profiling->profiler->add_update(seconds_since(update_started));
    const double seconds = seconds_since(started);
    current_ran = true;
    if (leader()) pending_report = PendingReport{stats.steps, seconds, profiled};
    else report(true, seconds, "");
    ++stats.steps;
    stats.last_step_s = seconds;
    if (profiled) end_profiled_step();
    return value.detach();
  }
};

Job::Job(std::string name, const torch::jit::Module& module, const std::vector<at::Tensor>& example_inputs,
         JobOptions options)
    : Job(std::move(name), Model::from_torchscript(module), example_inputs, std::move(options)) {}

Job::Job(std::string name, const Model& model, const std::vector<at::Tensor>& example_inputs, JobOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.graph = capture(model, example_inputs, name);
  if (!options.profile_graph_file.empty()) adopt_profiles(s.graph, options.profile_graph_file);
  s.devices = job_devices(options.devices, options.memory_bytes);
  for (const Device& d : s.devices.devices) s.any_cuda |= d.kind == DeviceKind::kCuda;
  s.placed = std::make_unique<PlacedModule>(model, s.graph, s.devices);
  if (options.profile_steps < 0) throw std::invalid_argument("profile_steps must be >= 0");
  s.profile_steps = options.profile_steps;
  if (std::any_of(options.memory_limit_bytes.begin(), options.memory_limit_bytes.end(), [](uint64_t b) { return b > 0; })) {
    if (options.memory_limit_bytes.size() > s.devices.size())
      throw std::invalid_argument("memory_limit_bytes has " + std::to_string(options.memory_limit_bytes.size()) +
                                  " entries for " + std::to_string(s.devices.size()) + " devices");
    s.memory_limit = std::make_unique<detail::DeviceMemoryLimit>(*s.placed, options.memory_limit_bytes);
    s.placed->set_observer(s.memory_limit.get());
  }
  Placement start = Placement::single(s.graph, 0);
  if (!options.start_device_of_op.empty()) start.device_of_op = options.start_device_of_op;
  start.enforce_pins(s.graph, s.devices);
  s.placed->set_placement(start);
  s.current.directive.placement = start;
  s.last_good = s.current;
  if (const std::optional<detail::ReplicaConfig> replicas = detail::replica_config(options.replicas)) {
    s.group = std::make_unique<detail::ReplicaGroup>(*replicas);
    // Rank 0's placements name devices by position: every rank needs as many, of the same kinds.
    detail::ReplicaGroup& group = *s.group;
    const std::string rank = "replica group: rank " + std::to_string(group.rank());
    std::vector<double> kinds;
    for (const Device& d : s.devices.devices) kinds.push_back(static_cast<double>(d.kind));
    if (!group.same_on_every_rank({static_cast<double>(kinds.size())}) || !group.same_on_every_rank(kinds)) {
      std::string names;
      for (const Device& d : s.devices.devices) names += (names.empty() ? "" : ", ") + d.name();
      throw std::invalid_argument(rank + " has the devices " + names +
                                  ", another rank has others: every rank lists as many devices, of the same kinds in "
                                  "the same order, since rank 0's placements name them by position");
    }
    // Ranks that disagree on these would wait for each other in different collectives.
    const std::vector<double> collectives = {static_cast<double>(replicas->cuda_collectives),
                                             detail::nccl_built() ? 1.0 : 0.0};
    if (!group.same_on_every_rank(collectives))
      throw std::invalid_argument(rank + " has cuda_collectives " +
                                  std::array<const char*, 3>{"auto", "nccl", "gloo"}.at(
                                      static_cast<size_t>(replicas->cuda_collectives)) +
                                  " in a build " + (detail::nccl_built() ? "with" : "without") +
                                  " NCCL; another rank differs: every rank needs the same cuda_collectives and the "
                                  "same build of the SDK");
    // 16 hex digits, compared as two halves that a double holds exactly.
    const std::string start_fingerprint = start.fingerprint();
    if (!group.same_on_every_rank({static_cast<double>(std::stoull(start_fingerprint.substr(0, 8), nullptr, 16)),
                                   static_cast<double>(std::stoull(start_fingerprint.substr(8), nullptr, 16))}))
      throw std::invalid_argument(rank + " starts from another placement than another rank (start_device_of_op): "
                                  "every rank starts from the same one");
    // Every replica starts from rank 0's weights, as torch's DistributedDataParallel does.
    std::vector<at::Tensor> state = s.placed->parameters();
    for (const auto& [buffer_name, b] : model.named_buffers()) state.push_back(b);
    s.group->broadcast(state, s.slots_of(state));
  }
  if (!options.use_daemon) return;
  JobChannelOptions channel;
  channel.socket_path = options.socket_path;
  channel.job = std::move(name);
  channel.devices = s.devices;
  if (s.group) channel.replica = messages::ReplicaInfo{s.group->rank(), s.group->size(), s.group->name()};
  channel.reconnect_interval_ms = options.reconnect_interval_ms;
  channel.torch_version = TORCH_VERSION;
  channel.expected_steps = options.expected_steps;
  // In a replica group rank 0's daemon decides: its directives hold for every rank. The other ranks
  // attach to their own daemons as followers, which show them and send them nothing.
  if (!s.leader()) {
    s.channel = std::make_unique<JobChannel>(std::move(channel));
    return;
  }
  channel.graph = s.graph;
  channel.start = start;
  channel.profile_steps = options.profile_steps;
  s.channel = std::make_unique<JobChannel>(std::move(channel));
  // Start where placementd says (a stored best placement) when it answers at once; when it is not
  // there, do not wait for it.
  s.channel->wait_for_directive(10000);
}

Job::~Job() = default;

std::unique_ptr<Job> attach(std::string name, const Model& model, const std::vector<at::Tensor>& example_inputs,
                            JobOptions options) {
  return std::make_unique<Job>(std::move(name), model, example_inputs, std::move(options));
}

std::unique_ptr<Job> attach(std::string name, const torch::jit::Module& module,
                            const std::vector<at::Tensor>& example_inputs, JobOptions options) {
  return std::make_unique<Job>(std::move(name), module, example_inputs, std::move(options));
}

std::vector<at::Tensor> Job::parameters() const { return impl_->placed->parameters(); }

at::Tensor Job::step(const std::vector<c10::IValue>& inputs, const LossFunction& loss,
                     torch::optim::Optimizer& optimizer) {
  TorchStepOptimizer adapted(optimizer);
  return step(inputs, loss, adapted);
}

at::Tensor Job::step(const std::vector<c10::IValue>& inputs, const LossFunction& loss, StepOptimizer& optimizer) {
  Impl& s = *impl_;
  if (s.group) return s.group_step(inputs, loss, optimizer);
  if (s.channel)
    if (std::optional<ReceivedDirective> d = s.channel->take_directive()) s.switch_to(std::move(*d), optimizer);
  bool profiled = s.begin_profiled_step();
  auto started = Clock::now();
  at::Tensor value;
  try {
    value = s.forward_backward(inputs, loss);
  } catch (const std::exception& e) {
    s.profiling.reset();  // the candidate failed: nothing to profile, nor to retry under the profiler
    profiled = false;
    // Only a placement placementd proposed is blamed; under the last good one it is the model's.
    if (s.current.directive.placement_id == 0) throw;
    s.report(false, seconds_since(started), e.what());
    for (at::Tensor& p : s.placed->parameters()) p.mutable_grad() = at::Tensor();
    s.current_ran = false;
    if (!s.switch_to(s.last_good, optimizer)) throw;
    ++s.stats.retried_steps;
    started = Clock::now();
    value = s.forward_backward(inputs, loss);
  }
  if (profiled) s.profiling->profiler->end_forward_backward();
  const auto update_started = Clock::now();
  optimizer.step();
  optimizer.zero_grad();
  if (s.any_cuda) detail::synchronize_cuda_devices(s.devices);
  if (profiled) s.profiling->profiler->add_update(seconds_since(update_started));
  const double seconds = seconds_since(started);
  s.current_ran = true;
  s.report(true, seconds, "", profiled);
  ++s.stats.steps;
  s.stats.last_step_s = seconds;
  if (profiled) s.end_profiled_step();
  return value.detach();
}

const Placement& Job::placement() const { return impl_->placed->placement(); }
const OpGraph& Job::graph() const { return impl_->graph; }
const DeviceSet& Job::devices() const { return impl_->devices; }
PlacedModule& Job::module() { return *impl_->placed; }

JobStats Job::stats() const {
  JobStats out = impl_->stats;
  const messages::Directive& d = impl_->current.directive;
  out.placement_id = d.placement_id;
  out.reason = d.placement_id == 0 ? "own" : messages::to_string(d.reason);
  out.state = d.placement_id == 0 ? "" : messages::to_string(d.state);
  if (impl_->group) {
    out.rank = impl_->group->rank();
    out.world_size = impl_->group->size();
    out.replica_group = impl_->group->name();
    out.collectives = impl_->group->routes();
  }
  return out;
}

std::string parameters_digest(const std::vector<at::Tensor>& tensors) {
  detail::Fnv1a hash;
  for (const at::Tensor& t : tensors) {
    const at::Tensor bytes = t.detach().to(at::kCPU).contiguous();
    hash.add(std::string(static_cast<const char*>(bytes.data_ptr()), bytes.numel() * bytes.element_size()));
  }
  return hash.hex();
}

JobChannel::Status Job::daemon() const { return impl_->channel ? impl_->channel->status() : JobChannel::Status{}; }

JobChannel::Status Job::detach() { return impl_->channel ? impl_->channel->close() : JobChannel::Status{}; }

}  // namespace placement
