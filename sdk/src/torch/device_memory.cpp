#include "device_memory.h"

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
      tally_(names_of(module.devices()), cpu_limits(module.devices(), std::move(limits))) {
  module_.set_memory_tally(&tally_);
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
  tally_.reset_peaks();
  tally_.set_enforcing(true);
}

void DeviceMemory::end_step() { tally_.set_enforcing(false); }

std::vector<uint64_t> DeviceMemory::peaks() const {
  std::vector<uint64_t> out;
  for (size_t d = 0; d < tally_.size(); ++d) out.push_back(tally_.peak(static_cast<int>(d)));
  return out;
}

}  // namespace placement::detail
