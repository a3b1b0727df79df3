#pragma once
// Times an op on a device nobody profiled it on, from what it computes (Op::work, counted at
// capture) and what the device can do (DeviceSpec): a roofline plus the host's launch cost.
// docs/simulator.md, "Cost model", has the formulas and what they leave out.

#include <cstdint>

#include "placement/devices.h"
#include "placement/graph.h"

namespace placementd::sim {

/// Which ops use TF32 tensor cores for float32 data, as PyTorch decides per job. The defaults are
/// PyTorch's: cuDNN convolutions on TF32 (torch.backends.cudnn.allow_tf32), matrix products in
/// full fp32 (torch.backends.cuda.matmul.allow_tf32, set_float32_matmul_precision("highest")).
struct MathModes {
  bool matmul_tf32 = false;
  bool conv_tf32 = true;
};

struct PredictedTime {
  double forward_s = 0.0;
  double backward_s = 0.0;
};

/// The arithmetic rate an op of this math class and dtype reaches at best on `spec`, FLOP/s.
double peak_flops(const placement::DeviceSpec& spec, placement::MathClass math,
                  const std::string& dtype, const MathModes& modes);

/// Forward and backward time of one op: for each pass, the larger of FLOPs ÷ (peak × compute
/// efficiency) and bytes ÷ (bandwidth × memory efficiency), plus kernels × launch time and a fused
/// RNN's library time. On a device with a convolution layout bandwidth, a convolution takes its
/// FLOPs' time plus its bytes at that rate instead.
PredictedTime predict_op_time(const placement::OpWork& work, const placement::DeviceSpec& spec,
                              const MathModes& modes);

/// What a fused RNN spends in its library beyond its dispatches, forward (backward: twice that):
/// rnn_layer_s per layer call and rnn_step_s per layer time step, or two launches per step where
/// the spec gives no step cost (cuDNN's GEMM and fused gates). 0 for other ops.
double rnn_library_time(const placement::OpWork& work, const placement::DeviceSpec& spec);

/// The part of predict_op_time() and predict_update_time() (the `update_s` member) that is the
/// host's launch cost: what changes, in proportion, when a device's launch_s is off (the refit's
/// "launch on <kind>" factor). A fused RNN's per-step cost counts where the spec gives none and
/// two launches a step stand for it.
struct LaunchShare {
  double forward_s = 0.0;
  double backward_s = 0.0;
  double update_s = 0.0;
};
LaunchShare launch_share(const placement::OpWork& work, uint64_t parameter_bytes,
                         const placement::DeviceSpec& spec);

/// Passes over the parameters' bytes that PyTorch's default (foreach) optimizer step makes, for
/// `optimizer_state_factor` states per parameter: SGD (0) reads parameter and gradient and writes
/// the parameter, 3; SGD with momentum (1) 8; Adam (2) 18, as torch/optim/adam.py's
/// _multi_tensor_adam runs lerp, mul, addcmul, sqrt, div, add and addcdiv over its lists, each
/// reading and writing whole tensors. Linear between those points.
double optimizer_passes(double optimizer_state_factor);

/// Time of the optimizer's update of `parameter_bytes` of parameters: optimizer_passes() over them
/// at the device's bandwidth, in one launch per pass (multi-tensor apply batches the tensors).
double predict_update_time(uint64_t parameter_bytes, double optimizer_state_factor,
                           const placement::DeviceSpec& spec);

}  // namespace placementd::sim
