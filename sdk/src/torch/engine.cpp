#include "placement/engine.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include <ATen/SequenceNumber.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include "memory_tally.h"
#include "op_program.h"
#include "physical_device.h"
#include "pinned_pool.h"
#include "placement/capture_error.h"
#include "residence_runtime.h"
#include "tensor_bytes.h"
#include "transfer.h"

namespace placement {

using detail::OpNode;
using detail::OpProgram;
using detail::physical;

namespace {

// Before a backward node of an op: what it allocates is its op's device's.
class CountOnDevice final : public torch::autograd::FunctionPreHook {
 public:
  CountOnDevice(detail::MemoryTally* tally, int device) : tally_(tally), device_(device) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    tally_->make_current(device_);
    return grads;
  }

 private:
  detail::MemoryTally* tally_;
  int device_;
};

// Hooks every autograd node `outputs`' op created (the sequence numbers it handed out, from
// `first`) to count on `device`.
void count_backward_on(detail::MemoryTally* tally, int device,
                       const std::vector<c10::IValue>& outputs, uint64_t first) {
  const uint64_t end = at::sequence_number::peek();
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : outputs) detail::tensors_in(v, tensors);
  std::vector<torch::autograd::Node*> work;
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.grad_fn()) work.push_back(t.grad_fn().get());
  std::unordered_set<torch::autograd::Node*> seen;
  while (!work.empty()) {
    torch::autograd::Node* n = work.back();
    work.pop_back();
    if (!n || n->sequence_nr() < first || n->sequence_nr() >= end || !seen.insert(n).second)
      continue;
    n->add_pre_hook(std::make_unique<CountOnDevice>(tally, device));
    for (const auto& edge : n->next_edges()) work.push_back(edge.function.get());
  }
}

// The window a plan's streamed proxies are filled ahead in: the one asked for, else
// kDefaultPrefetchBytes where a parameter homed on the host streams to a GPU (whose copies then
// run while it computes), and none where filling early only holds memory sooner.
uint64_t prefetch_bytes(const detail::ResidencePlan& plan, std::optional<uint64_t> asked) {
  if (asked) return *asked;
  const bool to_a_gpu =
      std::any_of(plan.proxies.begin(), plan.proxies.end(), [&](const detail::Proxy& p) {
        return p.fetch == Fetch::kStream && p.home.is_cpu() &&
               plan.devices.at(static_cast<size_t>(p.device_index)).is_cuda();
      });
  return to_a_gpu ? PlacedModule::kDefaultPrefetchBytes : 0;
}

}  // namespace

struct PlacedModule::Impl {
  Impl(Model m, OpGraph g, DeviceSet d)
      : model(std::move(m)), graph(std::move(g)), devices(std::move(d)) {}

  const OpProgram& program() const { return model.program(); }
  size_t index_of(const OpNode& node) const {
    return static_cast<size_t>(&node - program().nodes.data());
  }

  Model model;
  OpGraph graph;
  DeviceSet devices;
  Placement placement;
  OpObserver* observer = nullptr;
  std::vector<c10::Device> device_of;  // physical device per DeviceSet index
  std::vector<int> op_of_node;         // per node of the program: its op in `graph`, or -1
  /// The logical device an op's output lives on, per value slot; -1: unknown (graph inputs,
  /// plumbing), which is moved physically but never copied between logical devices.
  std::vector<int> home;
  /// The logical device of each parameter and buffer under the current placement.
  std::unordered_map<const c10::TensorImpl*, int> parameter_home;
  /// Counts placement changes: a Staged is committed only onto the placement it was staged from.
  uint64_t generation = 0;
  /// The position of each trained parameter in the program (and in the graph's parameter table).
  std::unordered_map<const c10::TensorImpl*, size_t> parameter_index;
  /// The placement's residence at work; null when it has none (every tensor where its reader
  /// runs), which costs a forward nothing.
  std::unique_ptr<detail::ResidenceRuntime> residence;
  detail::MemoryTally* tally = nullptr;
  /// set_prefetch_window's; nullopt: the default.
  std::optional<uint64_t> prefetch_window;

  // The logical device a tensor input comes from: a module tensor's home, else the device of the op
  // that produced slot `value` (-1 or unknown: -1).
  int home_of(const at::Tensor& t, int value) const {
    if (auto p = parameter_home.find(t.unsafeGetTensorImpl()); p != parameter_home.end())
      return p->second;
    if (value < 0) return -1;
    return home[static_cast<size_t>(value)];
  }

  at::Tensor move(const at::Tensor& t, int from, int to) const {
    // A parameter that lives away from its readers is read through its proxy on their device.
    if (residence)
      if (const detail::Proxy* p = residence->proxy_for(t, to)) return p->proxy;
    const c10::Device target = device_of[to];
    if (t.device() != target) return t.to(target);
    if (from >= 0 && from != to)
      return t.clone();  // between logical devices of one physical device
    return t;
  }

  // Moves a node's tensor inputs to `device`, the device its op runs on.
  void place_inputs(const OpNode& node, int device, std::vector<c10::IValue>& stack) const {
    for (size_t i = 0; i < stack.size(); ++i) {
      c10::IValue& value = stack[i];
      if (value.isTensor()) {
        // A Python number passed as a tensor stays one: kernels take it from the host.
        if (value.toTensor().unsafeGetTensorImpl()->is_wrapped_number()) continue;
        value = move(value.toTensor(), home_of(value.toTensor(), node.inputs[i].value), device);
      } else if (value.isDevice()) {
        value = device_of[device];  // factory ops (zeros, arange) create on the op's device
      } else if ((value.isList() || value.isTuple()) && node.inputs[i].nested_tensors) {
        value = move_nested(value, device);
      }
    }
  }

  // The tensors inside a list or tuple input, moved to `to`: an LSTM's weights (Tensor[]), the
  // indices of aten::index (Tensor?[]), an RNN's state tuple. Their producers are not tracked
  // through the container, so only a module tensor's home is known.
  c10::IValue move_nested(const c10::IValue& value, int to) const {
    return detail::map_tensors(value,
                               [&](const at::Tensor& t) { return move(t, home_of(t, -1), to); });
  }
};

PlacedModule::PlacedModule(const torch::jit::Module& module, OpGraph graph, DeviceSet devices)
    : PlacedModule(Model::from_torchscript(module), std::move(graph), std::move(devices)) {}

PlacedModule::PlacedModule(const Model& model, OpGraph graph, DeviceSet devices)
    : impl_(std::make_unique<Impl>(model, std::move(graph), std::move(devices))) {
  Impl& s = *impl_;
  s.devices.validate();
  for (const auto& d : s.devices.devices) s.device_of.push_back(physical(d));
  for (size_t k = 0; k < s.program().parameters.size(); ++k)
    s.parameter_index.emplace(s.program().parameters[k].unsafeGetTensorImpl(), k);
  s.op_of_node.assign(s.program().nodes.size(), -1);
  int next = 0;
  for (size_t i = 0; i < s.program().nodes.size(); ++i) {
    const OpNode& node = s.program().nodes[i];
    if (!node.tensor_op) continue;
    if (next >= static_cast<int>(s.graph.ops.size()) || s.graph.ops[next].kind != node.name)
      throw CaptureError("the graph does not belong to this model (op " + std::to_string(next) +
                         " differs); capture the model again");
    s.op_of_node[i] = next++;
  }
  if (next != static_cast<int>(s.graph.ops.size()))
    throw CaptureError("the graph has " + std::to_string(s.graph.ops.size()) + " ops, the model " +
                       std::to_string(next) + "; capture the model again");
  set_placement(Placement::single(s.graph, 0));
}

PlacedModule::~PlacedModule() = default;

struct PlacedModule::Staged::Impl {
  // What it was staged from: this module at this generation of its placement.
  const PlacedModule* owner = nullptr;
  uint64_t generation = 0;
  Placement placement;
  std::vector<int> home;
  std::unordered_map<const c10::TensorImpl*, int> parameter_home;
  std::vector<at::Tensor> moved;  // the module's tensors that move, with their copies in `data`
  std::vector<at::Tensor> data;
  detail::ResidencePlan residence;
  MigrationStats stats;
};

PlacedModule::Staged::Staged(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PlacedModule::Staged::Staged(Staged&&) noexcept = default;
PlacedModule::Staged& PlacedModule::Staged::operator=(Staged&&) noexcept = default;
PlacedModule::Staged::~Staged() = default;

std::optional<int> PlacedModule::Staged::device_of(const at::Tensor& parameter) const {
  const auto it = impl_->parameter_home.find(parameter.unsafeGetTensorImpl());
  if (it == impl_->parameter_home.end()) return std::nullopt;
  return it->second;
}

MigrationStats PlacedModule::set_placement(const Placement& placement) {
  return commit(stage(placement));
}

PlacedModule::Staged PlacedModule::stage(const Placement& placement) const {
  const Impl& s = *impl_;
  placement.validate(s.graph, s.devices);
  auto staged = std::make_unique<Staged::Impl>();
  staged->owner = this;
  staged->generation = s.generation;
  staged->placement = placement;
  staged->home.assign(s.program().num_values, -1);
  // All copies go in one batch, so GPU-to-GPU ones share one NCCL group and CPU-to-GPU ones the
  // staging.
  std::vector<detail::CopyRequest> copies;
  // A parameter that lives on the host and is read on a GPU is fetched there at every step: it
  // lives in the pinned pool, so that each fetch is one DMA.
  const bool has_gpu = std::any_of(s.device_of.begin(), s.device_of.end(),
                                   [](const c10::Device& d) { return d.is_cuda(); });
  for (size_t i = 0; i < s.program().nodes.size(); ++i) {
    const int op = s.op_of_node[i];
    if (op < 0) continue;
    const int device = placement.device_of_op[op];
    for (int out : s.program().nodes[i].outputs) staged->home[static_cast<size_t>(out)] = device;
    // A parameter or buffer lives on its first consumer's device, wherever else it is read from,
    // also when it reaches the op inside a list (an LSTM's weights); a parameter whose residence
    // names a home, there.
    for (const at::Tensor& tensor : s.program().module_state_read_by(i)) {
      int home = device;
      bool homed_away = false;
      if (const auto k = s.parameter_index.find(tensor.unsafeGetTensorImpl());
          k != s.parameter_index.end() && k->second < placement.residence.parameters.size() &&
          placement.residence.parameters[k->second].home >= 0) {
        home = placement.residence.parameters[k->second].home;
        homed_away = true;
      }
      const auto [it, first] = staged->parameter_home.emplace(tensor.unsafeGetTensorImpl(), home);
      if (!first) continue;
      const int device = home;
      const auto was = s.parameter_home.find(tensor.unsafeGetTensorImpl());
      const bool logical_move = was != s.parameter_home.end() && was->second != device;
      const bool pinned = homed_away && has_gpu && s.device_of[device].is_cpu();
      if (tensor.device() == s.device_of[device] && !logical_move &&
          (!pinned || detail::in_host_pool(tensor)))
        continue;
      // Logical devices of one physical device get their own copy (a clone), as separate GPUs
      // would.
      staged->stats.bytes += static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
      ++staged->stats.tensors;
      staged->moved.push_back(tensor);
      copies.push_back({tensor.detach(), s.device_of[device], pinned});
    }
  }
  at::NoGradGuard no_grad;
  staged->data = detail::copy_all(copies);
  staged->residence =
      detail::resolve_residence(s.program(), s.graph, placement, s.op_of_node, s.device_of);
  staged->stats.bytes += staged->residence.bytes;
  for (const detail::Proxy& p : staged->residence.proxies)
    staged->stats.tensors += p.fetch == Fetch::kPersist ? 1 : 0;
  return Staged(std::move(staged));
}

MigrationStats PlacedModule::commit(Staged staged) {
  Impl& s = *impl_;
  if (!staged.impl_ || staged.impl_->owner != this || staged.impl_->generation != s.generation)
    throw std::logic_error(
        "PlacedModule::commit: not staged from this module's current placement (stage again)");
  Staged::Impl& next = *staged.impl_;
  ++s.generation;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < next.moved.size(); ++i)
    next.moved[i].set_data(next.data[i]);  // in place: optimizers keep their tensor
  s.home = std::move(next.home);
  s.parameter_home = std::move(next.parameter_home);
  s.placement = std::move(next.placement);
  s.residence.reset();  // its proxies' hooks go with it
  if (!next.residence.empty()) {
    next.residence.prefetch_bytes = prefetch_bytes(next.residence, s.prefetch_window);
    s.residence = std::make_unique<detail::ResidenceRuntime>(std::move(next.residence));
    s.residence->set_tally(s.tally);
  }
  return next.stats;
}

std::optional<int> PlacedModule::device_of(const at::Tensor& parameter) const {
  const auto it = impl_->parameter_home.find(parameter.unsafeGetTensorImpl());
  if (it == impl_->parameter_home.end()) return std::nullopt;
  return it->second;
}

c10::Device PlacedModule::physical_device(int device) const { return impl_->device_of.at(device); }

const Placement& PlacedModule::placement() const { return impl_->placement; }
const OpGraph& PlacedModule::graph() const { return impl_->graph; }
const DeviceSet& PlacedModule::devices() const { return impl_->devices; }
const Model& PlacedModule::model() const { return impl_->model; }

std::vector<c10::IValue> PlacedModule::forward(const std::vector<c10::IValue>& inputs) {
  Impl& s = *impl_;
  detail::ResidenceRuntime* residence = s.residence.get();
  detail::MemoryTally* tally = s.tally;
  uint64_t sequence_start = 0;
  auto before = [&s, residence, tally, &sequence_start](const OpNode& node,
                                                        std::vector<c10::IValue>& stack) {
    const size_t index = s.index_of(node);
    const int op = s.op_of_node[index];
    const int device = op < 0 ? -1 : s.placement.device_of_op[op];
    if (op >= 0 && tally) {
      tally->make_current(device);  // its inputs' copies and its outputs are its device's
      sequence_start = at::sequence_number::peek();
    }
    if (residence) residence->prepare(index, op, device, stack);
    if (op >= 0) s.place_inputs(node, device, stack);
    if (residence) residence->before(index, op, device, stack);
    if (op >= 0 && s.observer) s.observer->before(op);
  };
  auto after = [&s, residence, tally, &sequence_start](const OpNode& node,
                                                       std::vector<c10::IValue>& stack) {
    const size_t index = s.index_of(node);
    const int op = s.op_of_node[index];
    if (residence) residence->after(index, op, stack);
    if (op >= 0 && tally)
      count_backward_on(tally, s.placement.device_of_op[op], stack, sequence_start);
    if (op >= 0 && s.observer) s.observer->after(op, stack);
  };
  if (!residence && !tally)
    return s.observer ? s.program().run(inputs, before, after) : s.program().run(inputs, before);
  // What the forward makes current on this thread is put back when it returns.
  const detail::MemoryTally::Scope scope(tally, -1);
  if (residence) residence->begin_forward(s.program());
  std::vector<c10::IValue> outputs = s.program().run(inputs, before, after);
  if (residence) residence->end_forward();
  return outputs;
}

void PlacedModule::set_observer(OpObserver* observer) { impl_->observer = observer; }

OpObserver::~OpObserver() = default;

std::vector<at::Tensor> PlacedModule::parameters() const { return impl_->model.parameters(); }

std::vector<std::pair<at::Tensor, int>> PlacedModule::held_tensors() const {
  std::vector<std::pair<at::Tensor, int>> out;
  for (const at::Tensor& p : parameters())
    if (const auto d = device_of(p)) out.emplace_back(p, *d);
  for (const auto& [name, b] : impl_->program().buffers)
    if (const auto d = device_of(b)) out.emplace_back(b, *d);
  if (impl_->residence)
    for (const detail::Proxy& p : impl_->residence->plan().proxies)
      out.emplace_back(p.proxy, p.device_index);
  return out;
}

void PlacedModule::set_memory_tally(detail::MemoryTally* tally) {
  impl_->tally = tally;
  if (impl_->residence) impl_->residence->set_tally(tally);
}

void PlacedModule::discard_gradients() {
  for (at::Tensor& p : parameters()) p.mutable_grad() = at::Tensor();
  if (impl_->residence) impl_->residence->discard_gradients();
}

bool PlacedModule::sends_gradients_to_host() const {
  return impl_->residence && impl_->residence->sends_gradients_to_host();
}

void PlacedModule::on_gradient_home(
    std::function<void(const at::Tensor&, const std::function<void()>&)> tell) {
  if (impl_->residence) impl_->residence->on_gradient_home(std::move(tell));
}

void PlacedModule::settle_copies() {
  if (impl_->residence) impl_->residence->settle();
}

void PlacedModule::set_prefetch_window(std::optional<uint64_t> bytes) {
  impl_->prefetch_window = bytes;
  if (impl_->residence)
    impl_->residence->set_prefetch_window(prefetch_bytes(impl_->residence->plan(), bytes));
}

ResidenceActivity PlacedModule::residence_activity() const {
  ResidenceActivity out;
  if (!impl_->residence) return out;
  for (const detail::Proxy& p : impl_->residence->plan().proxies) {
    ++out.proxies;
    out.streamed += p.fetch == Fetch::kStream ? 1 : 0;
  }
  const detail::ResidenceStats s = impl_->residence->stats();
  out.parameter_fetches = s.parameter_fetches;
  out.parameter_bytes_fetched = s.parameter_bytes_fetched;
  out.gradient_bytes_sent_home = s.gradient_bytes_sent_home;
  out.activations_evicted = s.activations_evicted;
  out.activation_bytes_evicted = s.activation_bytes_evicted;
  out.recompute_kept = s.recompute_kept;
  out.parameter_prefetches = s.parameter_prefetches;
  return out;
}

}  // namespace placement
