#include "device_memory.h"

#include <string>
#include <unordered_set>

#include <c10/util/Exception.h>

namespace placement::detail {

namespace {

std::vector<std::string> names_of(const DeviceSet& devices) {
  std::vector<std::string> out;
  for (const Device& d : devices.devices) out.push_back(d.name());
  return out;
}

std::vector<uint64_t> cpu_limits(const DeviceSet& devices, std::vector<uint64_t> limits) {
  limits.resize(devices.size(), 0);
  for (size_t d = 0; d < limits.size(); ++d)
    if (devices.devices[d].kind != DeviceKind::kCpu) limits[d] = 0;
  return limits;
}

}  // namespace

DeviceMemory::DeviceMemory(PlacedModule& module, std::vector<uint64_t> limits)
    : module_(module),
      names_(names_of(module.devices())),
      limits_(cpu_limits(module.devices(), std::move(limits))),
      tally_(names_, limits_) {
  module_.set_memory_tally(&tally_);
  // Only parameters an op reads get a gradient and state: a lower bound, so nothing that could
  // fit is refused. The same tensors across placements (a swap moves them in place).
  std::unordered_set<std::string> read;
  for (const Parameter& p : module_.graph().parameters)
    if (!p.readers.empty()) read.insert(p.name);
  for (const auto& [name, p] : module_.model().named_parameters())
    if (read.count(name)) read_parameters_.insert(p.unsafeGetTensorImpl());
}

DeviceMemory::~DeviceMemory() { module_.set_memory_tally(nullptr); }

void DeviceMemory::begin_step(StepOptimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  std::vector<int> homes;
  for (const auto& [tensor, device] : module_.held_tensors()) {
    tally_.adopt(tensor, device);
    if (tensor.grad().defined()) tally_.adopt(tensor.grad(), device);
    if (tensor.requires_grad()) {
      parameters.push_back(tensor);
      homes.push_back(device);
    }
  }
  const std::vector<std::vector<at::Tensor>> state = optimizer.state_tensors(parameters);
  for (size_t i = 0; i < state.size() && i < homes.size(); ++i)
    for (const at::Tensor& t : state[i]) tally_.adopt(t, homes[i]);
  refuse_what_cannot_fit(optimizer, parameters, homes, state);
  tally_.reset_peaks();
  tally_.set_enforcing(true);
}

void DeviceMemory::refuse_what_cannot_fit(StepOptimizer& optimizer,
                                          const std::vector<at::Tensor>& held,
                                          const std::vector<int>& homes,
                                          const std::vector<std::vector<at::Tensor>>& state) {
  // What the step will add at each parameter's home whatever its activations: the gradient
  // autograd makes for it, and the optimizer's state its first update makes.
  std::vector<uint64_t> gradients(limits_.size(), 0), to_come(limits_.size(), 0);
  for (size_t i = 0; i < held.size(); ++i) {
    const at::Tensor& p = held[i];
    const auto home = static_cast<size_t>(homes[i]);
    if (home >= limits_.size() || limits_[home] == 0 ||
        !read_parameters_.count(p.unsafeGetTensorImpl()))
      continue;  // a proxy's gradient goes home, and its state is its parameter's
    if (!p.grad().defined()) gradients[home] += p.nbytes();
    const std::optional<uint64_t> expected = optimizer.expected_state_bytes(p);
    uint64_t existing = 0;
    if (i < state.size())
      for (const at::Tensor& t : state[i]) existing += t.nbytes();
    if (expected && *expected > existing) to_come[home] += *expected - existing;
  }
  for (size_t d = 0; d < limits_.size(); ++d) {
    const uint64_t held_now = tally_.live(static_cast<int>(d));
    const uint64_t need = held_now + gradients[d] + to_come[d];
    if (limits_[d] == 0 || need <= limits_[d]) continue;
    TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory on ", names_[d],
                     " (its memory limit), refused before the step ran: it holds ", held_now,
                     " bytes (parameters, buffers, kept copies, the optimizer's state so far), the "
                     "step's gradients add ",
                     gradients[d], " and the optimizer's first update ", to_come[d],
                     " bytes of state, ", need, " bytes before any activation against its limit ",
                     limits_[d],
                     "; home parameters elsewhere (the placement's residence) or raise the limit");
  }
}

void DeviceMemory::end_step() { tally_.set_enforcing(false); }

std::vector<uint64_t> DeviceMemory::peaks() const {
  std::vector<uint64_t> out;
  for (size_t d = 0; d < tally_.size(); ++d) out.push_back(tally_.peak(static_cast<int>(d)));
  return out;
}

}  // namespace placement::detail
