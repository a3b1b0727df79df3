#pragma once
// Measures this machine's CPU as LibTorch uses it, for the simulator's cost model: the figures a
// topology file's CPU device takes (docs/simulator.md, "Cost model"). In libplacement_torch.

#include "placement/devices.h"

namespace placement {

struct CpuCalibration {
  /// Achieved rates, so compute and memory efficiency are 1: fp32_flops from a large matrix
  /// product, memory_bandwidth from an elementwise add over tensors far larger than the caches,
  /// launch_s and step_s from training steps of 8 and 32 tiny linear + ReLU layers through
  /// placementd's engine (per dispatch as the cost model counts them, and what is left at none),
  /// conv_efficiency (as a fraction of fp32_flops) and conv_layout_bandwidth from three
  /// convolutions trained (bound by arithmetic, by activations, by weights), rnn_layer_s and
  /// rnn_step_s from an LSTM trained at 4 and 32 steps, and pool_efficiency from a 3x3 max pooling.
  DeviceSpec spec;
  /// Intra-op threads the figures were measured with.
  int threads = 0;
};

/// Takes about a second. `threads` > 0 sets LibTorch's intra-op threads for the measurement (and
/// leaves them set); 0 keeps LibTorch's current setting.
CpuCalibration calibrate_cpu(int threads = 0);

}  // namespace placement
