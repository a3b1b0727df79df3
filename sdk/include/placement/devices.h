#pragma once
// The devices a job may place ops on, and the links between them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace placement {

enum class DeviceKind { kCpu, kCuda };

/// "cpu" or "cuda".
const char* to_string(DeviceKind kind);
/// Inverse of to_string(DeviceKind); throws std::invalid_argument on anything else.
DeviceKind device_kind_from_string(const std::string& text);

/// What a device can do, for the simulator's cost model to time ops nobody profiled on it
/// (docs/simulator.md, "Cost model"): peak rates from a data sheet or a calibration run, and the
/// fractions of them real kernels reach.
struct DeviceSpec {
  /// The preset the figures came from ("h100-sxm"); empty when a topology gave them.
  std::string preset;
  /// Peak FLOP/s: fp32 on the vector units, and on tensor cores per input type (0: no tensor
  /// cores for that type; the op then runs at the fp32 rate, or at half it for fp16/bf16 storage).
  double fp32_flops = 0.0;
  double tf32_flops = 0.0;
  double bf16_flops = 0.0;
  double fp16_flops = 0.0;
  /// Memory bandwidth, bytes/s.
  double memory_bandwidth = 0.0;
  /// Host time to dispatch one kernel (framework overhead + launch), seconds.
  double launch_s = 0.0;
  /// Fractions of the peaks that large kernels reach: of the arithmetic peak for matrix products
  /// and convolutions, of the bandwidth for everything else.
  double compute_efficiency = 0.7;
  double memory_efficiency = 0.8;
  /// Convolutions' fraction of the arithmetic peak where it differs from compute_efficiency
  /// (0: the same). A CPU's convolution kernels reach far less of it than its matrix products.
  double conv_efficiency = 0.0;
  /// Bytes/s at which the convolution library moves a convolution's operands (input, weights,
  /// output) into and out of its own blocked layout, as oneDNN does on CPUs for every NCHW call.
  /// Where given (> 0), a convolution costs its FLOPs plus its bytes at this rate, not the larger
  /// of the two: a CPU's weight-heavy layers (512 channels at 2x2) run at a tenth of their
  /// roofline. 0: the roofline (GPUs).
  double conv_layout_bandwidth = 0.0;
  /// Pooling's fraction of the fp32 peak, per window element compared or summed, where it differs
  /// from compute_efficiency (0: the same). A CPU's NCHW max pooling reaches well under 1%.
  double pool_efficiency = 0.0;
  /// A fused RNN's cost in its library beyond its dispatches, per layer call and per layer time
  /// step, forward (backward: twice that). 0 steps: two launches per step, as cuDNN runs a GEMM
  /// and the fused gates every step. oneDNN on a CPU sets each call up at length (about 100 us)
  /// and then loops over the steps at a few microseconds each.
  double rnn_layer_s = 0.0;
  double rnn_step_s = 0.0;
  /// Host time a training step spends outside the graph's ops, once per step: the loss, starting
  /// autograd's backward, the optimizer's and zero_grad's loops. The simulator charges it once per
  /// step: the largest among the devices a placement uses.
  double step_s = 0.0;

  bool operator==(const DeviceSpec& other) const;
};

/// One device. On a GPU-less machine several logical CPU devices ("cpu:0", "cpu:1") stand in for
/// GPUs so the cross-device paths run everywhere.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  /// Memory available for the job on this device; 0 means unknown and is rejected by validate().
  uint64_t memory_bytes = 0;
  /// Relative compute speed (1.0 = reference), used by the simulator.
  double speed = 1.0;
  /// Figures for the cost model; without them only profiled ops can be timed on this device.
  std::optional<DeviceSpec> spec;

  /// "cpu:0", "cuda:1".
  std::string name() const;
  bool operator==(const Device& other) const;
};

/// Parses "cpu", "cpu:1", "cuda:0"; throws std::invalid_argument naming the text otherwise.
Device parse_device_name(const std::string& text);

/// A set of devices with a full link matrix. bandwidth[i][j] is bytes/s from device i to device j,
/// latency[i][j] seconds; the diagonal is ignored.
class DeviceSet {
 public:
  std::vector<Device> devices;
  std::vector<std::vector<double>> bandwidth;
  std::vector<std::vector<double>> latency;

  /// A set with uniform links: every pair gets `bandwidth_bytes_per_s` and `latency_s`.
  static DeviceSet uniform(std::vector<Device> devices, double bandwidth_bytes_per_s,
                           double latency_s);

  size_t size() const { return devices.size(); }
  /// Index of the device named `name`, or -1.
  int index_of(const std::string& name) const;

  /// Throws std::invalid_argument naming the device or link at fault: no devices, duplicate
  /// names, a device without memory, a matrix of the wrong size, a non-positive bandwidth.
  void validate() const;

  /// Stable identity of the device set (kinds, indices, memory), independent of link figures that
  /// are re-measured every run.
  std::string fingerprint() const;

  bool operator==(const DeviceSet& other) const;
};

}  // namespace placement
