#include "planning/sim/cost_model.h"

#include <algorithm>

namespace placementd::sim {

using placement::DeviceSpec;
using placement::MathClass;

double peak_flops(const DeviceSpec& spec, MathClass math, const std::string& dtype,
                  const MathModes& modes) {
  if (math == MathClass::kVector || math == MathClass::kPool) return spec.fp32_flops;
  auto tensor_cores_or_fp32 = [&](double rate) { return rate > 0 ? rate : spec.fp32_flops; };
  if (dtype == "bfloat16") return tensor_cores_or_fp32(spec.bf16_flops);
  if (dtype == "float16") return tensor_cores_or_fp32(spec.fp16_flops);
  if (dtype == "float64") return spec.fp32_flops / 2;
  const bool tf32 = math == MathClass::kConv ? modes.conv_tf32 : modes.matmul_tf32;
  return tf32 ? tensor_cores_or_fp32(spec.tf32_flops) : spec.fp32_flops;
}

PredictedTime predict_op_time(const placement::OpWork& work, const DeviceSpec& spec,
                              const MathModes& modes) {
  double efficiency = spec.compute_efficiency;
  if (work.math == MathClass::kConv && spec.conv_efficiency > 0) efficiency = spec.conv_efficiency;
  if (work.math == MathClass::kPool && spec.pool_efficiency > 0) efficiency = spec.pool_efficiency;
  const double flops_per_s = peak_flops(spec, work.math, work.dtype, modes) * efficiency;
  const double bytes_per_s = spec.memory_bandwidth * spec.memory_efficiency;
  // A library that converts every convolution's operands to its own layout does that before and
  // after the arithmetic, not under it.
  const bool layout_pass = work.math == MathClass::kConv && spec.conv_layout_bandwidth > 0;
  auto pass = [&](double flops, double bytes, int kernels) {
    const double compute = flops / flops_per_s;
    const double work = layout_pass ? compute + bytes / spec.conv_layout_bandwidth
                                    : std::max(compute, bytes / bytes_per_s);
    return work + kernels * spec.launch_s;
  };
  const double rnn = rnn_library_time(work, spec);
  return {pass(work.forward_flops, work.forward_bytes, work.forward_kernels) + rnn,
          pass(work.backward_flops, work.backward_bytes, work.backward_kernels) + 2.0 * rnn};
}

double rnn_library_time(const placement::OpWork& work, const DeviceSpec& spec) {
  const double per_step = spec.rnn_step_s > 0 ? spec.rnn_step_s : 2.0 * spec.launch_s;
  return work.rnn_layers * spec.rnn_layer_s + work.rnn_steps * per_step;
}

LaunchShare launch_share(const placement::OpWork& work, uint64_t parameter_bytes,
                         const DeviceSpec& spec) {
  const double rnn_steps = spec.rnn_step_s > 0 ? 0.0 : work.rnn_steps * 2.0 * spec.launch_s;
  return {work.forward_kernels * spec.launch_s + rnn_steps,
          work.backward_kernels * spec.launch_s + 2.0 * rnn_steps,
          parameter_bytes > 0 ? spec.launch_s : 0.0};
}

double optimizer_passes(double optimizer_state_factor) {
  const double f = std::max(0.0, optimizer_state_factor);
  return f <= 1.0 ? 3.0 + 5.0 * f : 8.0 + 10.0 * (f - 1.0);
}

double predict_update_time(uint64_t parameter_bytes, double optimizer_state_factor,
                           const DeviceSpec& spec) {
  if (parameter_bytes == 0) return 0.0;
  const double streamed =
      static_cast<double>(parameter_bytes) * optimizer_passes(optimizer_state_factor);
  // Multi-tensor apply launches each pass once for a whole parameter list; charged per op here.
  return streamed / (spec.memory_bandwidth * spec.memory_efficiency) + spec.launch_s;
}

}  // namespace placementd::sim
