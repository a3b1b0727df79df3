#include "placement/engine.h"

#include <stdexcept>

#include <ATen/core/grad_mode.h>

#include "op_program.h"
#include "physical_device.h"
#include "placement/capture.h"
#include "tensor_bytes.h"
#include "transfer.h"

namespace placement {

using detail::OpNode;
using detail::OpProgram;
using detail::physical;

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

  // The logical device a tensor input comes from: a module tensor's home, else the device of the op
  // that produced slot `value` (-1 or unknown: -1).
  int home_of(const at::Tensor& t, int value) const {
    if (auto p = parameter_home.find(t.unsafeGetTensorImpl()); p != parameter_home.end())
      return p->second;
    if (value < 0) return -1;
    return home[static_cast<size_t>(value)];
  }

  at::Tensor move(const at::Tensor& t, int from, int to) const {
    const c10::Device target = device_of[to];
    if (t.device() != target) return t.to(target);
    if (from >= 0 && from != to)
      return t.clone();  // between logical devices of one physical device
    return t;
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
  for (size_t i = 0; i < s.program().nodes.size(); ++i) {
    const int op = s.op_of_node[i];
    if (op < 0) continue;
    const int device = placement.device_of_op[op];
    for (int out : s.program().nodes[i].outputs) staged->home[static_cast<size_t>(out)] = device;
    // A parameter or buffer lives on its first consumer's device, wherever else it is read from,
    // also when it reaches the op inside a list (an LSTM's weights).
    for (const at::Tensor& tensor : s.program().module_state_read_by(i)) {
      const auto [it, first] = staged->parameter_home.emplace(tensor.unsafeGetTensorImpl(), device);
      if (!first) continue;
      const auto was = s.parameter_home.find(tensor.unsafeGetTensorImpl());
      const bool logical_move = was != s.parameter_home.end() && was->second != device;
      if (tensor.device() == s.device_of[device] && !logical_move) continue;
      // Logical devices of one physical device get their own copy (a clone), as separate GPUs
      // would.
      staged->stats.bytes += static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
      ++staged->stats.tensors;
      staged->moved.push_back(tensor);
      copies.push_back({tensor.detach(), s.device_of[device]});
    }
  }
  at::NoGradGuard no_grad;
  staged->data = detail::copy_all(copies);
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
  const Impl& s = *impl_;
  auto before = [&s](const OpNode& node, std::vector<c10::IValue>& stack) {
    const int op = s.op_of_node[s.index_of(node)];
    if (op < 0) return;
    const int device = s.placement.device_of_op[op];
    for (size_t i = 0; i < stack.size(); ++i) {
      c10::IValue& value = stack[i];
      if (value.isTensor()) {
        // A Python number passed as a tensor stays one: kernels take it from the host.
        if (value.toTensor().unsafeGetTensorImpl()->is_wrapped_number()) continue;
        value = s.move(value.toTensor(), s.home_of(value.toTensor(), node.inputs[i].value), device);
      } else if (value.isDevice()) {
        value = s.device_of[device];  // factory ops (zeros, arange) create on the op's device
      } else if ((value.isList() || value.isTuple()) && node.inputs[i].nested_tensors) {
        value = s.move_nested(value, device);
      }
    }
  };
  if (!s.observer) return s.program().run(inputs, before);
  auto observed_before = [&s, &before](const OpNode& node, std::vector<c10::IValue>& stack) {
    before(node, stack);
    if (const int op = s.op_of_node[s.index_of(node)]; op >= 0) s.observer->before(op);
  };
  auto observed_after = [&s](const OpNode& node, std::vector<c10::IValue>& stack) {
    if (const int op = s.op_of_node[s.index_of(node)]; op >= 0) s.observer->after(op, stack);
  };
  return s.program().run(inputs, observed_before, observed_after);
}

void PlacedModule::set_observer(OpObserver* observer) { impl_->observer = observer; }

OpObserver::~OpObserver() = default;

std::vector<at::Tensor> PlacedModule::parameters() const { return impl_->model.parameters(); }

}  // namespace placement
