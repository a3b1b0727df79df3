#include "placement/devices.h"

#include <set>
#include <stdexcept>

#include "hash.h"

namespace placement {

const char* to_string(DeviceKind kind) { return kind == DeviceKind::kCuda ? "cuda" : "cpu"; }

DeviceKind device_kind_from_string(const std::string& text) {
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  throw std::invalid_argument("unknown device kind '" + text + "' (expected cpu or cuda)");
}

std::string Device::name() const {
  return std::string(to_string(kind)) + ":" + std::to_string(index);
}

bool DeviceSpec::operator==(const DeviceSpec& o) const {
  return preset == o.preset && fp32_flops == o.fp32_flops && tf32_flops == o.tf32_flops &&
         bf16_flops == o.bf16_flops && fp16_flops == o.fp16_flops &&
         memory_bandwidth == o.memory_bandwidth && launch_s == o.launch_s &&
         compute_efficiency == o.compute_efficiency && memory_efficiency == o.memory_efficiency &&
         conv_efficiency == o.conv_efficiency && conv_layout_bandwidth == o.conv_layout_bandwidth &&
         pool_efficiency == o.pool_efficiency && rnn_layer_s == o.rnn_layer_s &&
         rnn_step_s == o.rnn_step_s && step_s == o.step_s;
}

bool Device::operator==(const Device& o) const {
  return kind == o.kind && index == o.index && memory_bytes == o.memory_bytes && speed == o.speed &&
         spec == o.spec;
}

Device parse_device_name(const std::string& text) {
  Device device;
  const auto colon = text.find(':');
  device.kind = device_kind_from_string(text.substr(0, colon));
  if (colon == std::string::npos) return device;
  const std::string index = text.substr(colon + 1);
  if (index.empty() || index.size() > 4 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("bad device name '" + text + "' (expected e.g. cpu:0 or cuda:1)");
  device.index = std::stoi(index);
  return device;
}

DeviceSet DeviceSet::uniform(std::vector<Device> devices, double bandwidth_bytes_per_s,
                             double latency_s) {
  DeviceSet set;
  const size_t n = devices.size();
  set.devices = std::move(devices);
  set.bandwidth.assign(n, std::vector<double>(n, bandwidth_bytes_per_s));
  set.latency.assign(n, std::vector<double>(n, latency_s));
  return set;
}

int DeviceSet::index_of(const std::string& name) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name() == name) return static_cast<int>(i);
  return -1;
}

void DeviceSet::validate() const {
  if (devices.empty()) throw std::invalid_argument("device set has no devices");
  std::set<std::string> names;
  for (const Device& d : devices) {
    if (d.index < 0) throw std::invalid_argument("device " + d.name() + ": negative index");
    if (!names.insert(d.name()).second)
      throw std::invalid_argument("device " + d.name() + " appears twice");
    if (d.memory_bytes == 0) throw std::invalid_argument("device " + d.name() + " has no memory");
    if (!(d.speed > 0)) throw std::invalid_argument("device " + d.name() + ": speed must be > 0");
    if (const auto& s = d.spec) {
      const std::string where = "device " + d.name() + " spec: ";
      if (!(s->fp32_flops > 0)) throw std::invalid_argument(where + "fp32 FLOP/s must be > 0");
      if (!(s->memory_bandwidth > 0))
        throw std::invalid_argument(where + "memory bandwidth must be > 0");
      if (!(s->tf32_flops >= 0 && s->bf16_flops >= 0 && s->fp16_flops >= 0))
        throw std::invalid_argument(where + "tensor-core FLOP/s must be >= 0");
      if (!(s->launch_s >= 0 && s->rnn_layer_s >= 0 && s->rnn_step_s >= 0 && s->step_s >= 0))
        throw std::invalid_argument(where + "launch, RNN and step times must be >= 0");
      if (!(s->compute_efficiency > 0 && s->compute_efficiency <= 1 && s->memory_efficiency > 0 &&
            s->memory_efficiency <= 1 && s->conv_efficiency >= 0 && s->conv_efficiency <= 1 &&
            s->pool_efficiency >= 0 && s->pool_efficiency <= 1))
        throw std::invalid_argument(where + "efficiencies must be in (0, 1]");
      if (!(s->conv_layout_bandwidth >= 0))
        throw std::invalid_argument(where + "convolution layout bandwidth must be >= 0");
    }
  }
  const size_t n = devices.size();
  auto check_matrix = [&](const std::vector<std::vector<double>>& m, const char* what,
                          bool positive) {
    if (m.size() != n)
      throw std::invalid_argument(std::string(what) + " matrix has " + std::to_string(m.size()) +
                                  " rows for " + std::to_string(n) + " devices");
    for (size_t i = 0; i < n; ++i) {
      if (m[i].size() != n)
        throw std::invalid_argument(std::string(what) + " matrix row " + std::to_string(i) +
                                    " has " + std::to_string(m[i].size()) + " entries for " +
                                    std::to_string(n) + " devices");
      for (size_t j = 0; j < n; ++j) {
        if (i == j) continue;
        if (positive ? !(m[i][j] > 0) : !(m[i][j] >= 0))
          throw std::invalid_argument(std::string(what) + " from " + devices[i].name() + " to " +
                                      devices[j].name() + " must be " +
                                      (positive ? "> 0" : ">= 0"));
      }
    }
  };
  check_matrix(bandwidth, "bandwidth", true);
  check_matrix(latency, "latency", false);
}

std::string DeviceSet::fingerprint() const {
  detail::Fnv1a h;
  h.add(static_cast<uint64_t>(devices.size()));
  for (const Device& d : devices) h.add(d.name()).add(d.memory_bytes);
  return h.hex();
}

bool DeviceSet::operator==(const DeviceSet& o) const {
  return devices == o.devices && bandwidth == o.bandwidth && latency == o.latency;
}

}  // namespace placement
