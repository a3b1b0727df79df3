#include "placement/engine.h"

#include <unordered_map>

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/api/module.h>

#include "placement/capture.h"
#include "physical_device.h"
#include "program.h"
#include "tensor_bytes.h"
#include "transfer.h"

namespace placement {

using detail::physical;
using detail::Program;
using torch::jit::Node;
using torch::jit::Value;

struct PlacedModule::Impl {
  Impl(const torch::jit::Module& m, OpGraph g, DeviceSet d)
      : module(m), program(m), graph(std::move(g)), devices(std::move(d)) {}

  torch::jit::Module module;
  Program program;
  OpGraph graph;
  DeviceSet devices;
  Placement placement;
  OpObserver* observer = nullptr;
  std::vector<c10::Device> device_of;  // physical device per DeviceSet index
  std::unordered_map<const Node*, int> op_of_node;
  /// The logical device an op's output lives on; absent: unknown (graph inputs, plumbing), which is
  /// moved physically but never copied between logical devices.
  std::unordered_map<const Value*, int> home;
  /// The logical device of each parameter and buffer under the current placement.
  std::unordered_map<const c10::TensorImpl*, int> parameter_home;

  // The logical device a tensor input comes from: a module tensor's home, else the device of the op
  // that produced `value` (nullptr or unknown: -1).
  int home_of(const at::Tensor& t, const Value* value) const {
    if (auto p = parameter_home.find(t.unsafeGetTensorImpl()); p != parameter_home.end()) return p->second;
    if (!value) return -1;
    auto it = home.find(value);
    return it == home.end() ? -1 : it->second;
  }

  at::Tensor move(const at::Tensor& t, int from, int to) const {
    const c10::Device target = device_of[to];
    if (t.device() != target) return t.to(target);
    if (from >= 0 && from != to) return t.clone();  // between logical devices of one physical device
    return t;
  }

  // The tensors inside a list or tuple input, moved to `to`: an LSTM's weights (Tensor[]), the
  // indices of aten::index (Tensor?[]), an RNN's state tuple. Their producers are not tracked
  // through the container, so only a module tensor's home is known.
  c10::IValue move_nested(const c10::IValue& value, int to) const {
    return detail::map_tensors(value, [&](const at::Tensor& t) { return move(t, home_of(t, nullptr), to); });
  }
};

PlacedModule::PlacedModule(const torch::jit::Module& module, OpGraph graph, DeviceSet devices)
    : impl_(std::make_unique<Impl>(module, std::move(graph), std::move(devices))) {
  impl_->devices.validate();
  for (const auto& d : impl_->devices.devices) impl_->device_of.push_back(physical(d));
  int next = 0;
  for (const Node* node : impl_->program.graph().nodes()) {
    if (!Program::is_tensor_op(node)) continue;
    if (next >= static_cast<int>(impl_->graph.ops.size()) || impl_->graph.ops[next].kind != node->kind().toQualString())
      throw CaptureError("the graph does not belong to this module (op " + std::to_string(next) +
                         " differs); capture the module again");
    impl_->op_of_node[node] = next++;
  }
  if (next != static_cast<int>(impl_->graph.ops.size()))
    throw CaptureError("the graph has " + std::to_string(impl_->graph.ops.size()) + " ops, the module " +
                       std::to_string(next) + "; capture the module again");
  set_placement(Placement::single(impl_->graph, 0));
}

PlacedModule::~PlacedModule() = default;

MigrationStats PlacedModule::set_placement(const Placement& placement) {
  Impl& s = *impl_;
  placement.validate(s.graph, s.devices);
  std::unordered_map<const Value*, int> home;
  std::unordered_map<const c10::TensorImpl*, int> parameter_home;
  // Copies first, commit after: if a copy fails (out of memory), nothing has changed. All copies
  // go in one batch, so GPU-to-GPU ones share one NCCL group and CPU-to-GPU ones the staging.
  std::vector<at::Tensor> moved;
  std::vector<detail::CopyRequest> copies;
  MigrationStats stats;
  for (const Node* node : s.program.graph().nodes()) {
    auto op = s.op_of_node.find(node);
    if (op == s.op_of_node.end()) continue;
    const int device = placement.device_of_op[op->second];
    for (const Value* out : node->outputs()) home[out] = device;
    // A parameter or buffer lives on its first consumer's device, wherever else it is read from,
    // also when it reaches the op inside a list (an LSTM's weights).
    for (const at::Tensor& tensor : s.program.module_state_read_by(node)) {
      const auto [it, first] = parameter_home.emplace(tensor.unsafeGetTensorImpl(), device);
      if (!first) continue;
      const auto was = s.parameter_home.find(tensor.unsafeGetTensorImpl());
      const bool logical_move = was != s.parameter_home.end() && was->second != device;
      if (tensor.device() == s.device_of[device] && !logical_move) continue;
      // Logical devices of one physical device get their own copy (a clone), as separate GPUs would.
      stats.bytes += static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
      ++stats.tensors;
      moved.push_back(tensor);
      copies.push_back({tensor.detach(), s.device_of[device]});
    }
  }
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> data = detail::copy_all(copies);
  for (size_t i = 0; i < moved.size(); ++i) moved[i].set_data(data[i]);  // in place: optimizers keep their tensor
  s.home = std::move(home);
  s.parameter_home = std::move(parameter_home);
  s.placement = placement;
  return stats;
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

std::vector<c10::IValue> PlacedModule::forward(const std::vector<c10::IValue>& inputs) {
  const Impl& s = *impl_;
  auto before = [&s](const Node* node, std::vector<c10::IValue>& stack) {
    auto op = s.op_of_node.find(node);
    if (op == s.op_of_node.end()) return;
    const int device = s.placement.device_of_op[op->second];
    for (size_t i = 0; i < stack.size(); ++i) {
      c10::IValue& value = stack[i];
      if (value.isTensor()) {
        value = s.move(value.toTensor(), s.home_of(value.toTensor(), node->inputs()[i]), device);
      } else if (value.isDevice()) {
        value = s.device_of[device];  // factory ops (zeros, arange) create on the op's device
      } else if ((value.isList() || value.isTuple()) && Program::may_hold_tensors(node->inputs()[i]->type())) {
        value = s.move_nested(value, device);
      }
    }
  };
  if (!s.observer) return s.program.run(inputs, before);
  auto observed_before = [&s, &before](const Node* node, std::vector<c10::IValue>& stack) {
    before(node, stack);
    if (auto op = s.op_of_node.find(node); op != s.op_of_node.end()) s.observer->before(op->second);
  };
  auto observed_after = [&s](const Node* node, std::vector<c10::IValue>& stack) {
    if (auto op = s.op_of_node.find(node); op != s.op_of_node.end()) s.observer->after(op->second, stack);
  };
  return s.program.run(inputs, observed_before, observed_after);
}

void PlacedModule::set_observer(OpObserver* observer) { impl_->observer = observer; }

OpObserver::~OpObserver() = default;

std::vector<at::Tensor> PlacedModule::parameters() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : impl_->module.parameters()) out.push_back(p);
  return out;
}

}  // namespace placement
