#include "placement/calibration.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/api/module.h>

#include "placement/capture.h"
#include "placement/engine.h"

namespace placement {

namespace {

// Median seconds of `runs` calls of `f`, after two calls to warm caches and thread pools.
template <typename F>
double median_seconds(int runs, F&& f) {
  using Clock = std::chrono::steady_clock;
  f();
  f();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
  return times[runs / 2];
}

}  // namespace

CpuCalibration calibrate_cpu(int threads) {
  if (threads > 0) at::set_num_threads(threads);
  CpuCalibration c;
  c.threads = at::get_num_threads();
  c.spec.preset = "measured";
  c.spec.compute_efficiency = 1.0;
  c.spec.memory_efficiency = 1.0;

  // A matrix product large enough for the BLAS to reach its steady rate on every thread.
  constexpr int64_t n = 1024;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::Tensor product = at::empty({n, n});
  const double matmul_s = median_seconds(5, [&] { at::mm_out(product, a, b); });
  c.spec.fp32_flops = 2.0 * n * n * n / matmul_s;

  // 3 x 64 MiB, far beyond the last-level cache: two tensors read, one written.
  constexpr int64_t elements = 16 << 20;
  const at::Tensor x = at::randn({elements}), y = at::randn({elements});
  at::Tensor sum = at::empty({elements});
  const double add_s = median_seconds(5, [&] { at::add_out(sum, x, y); });
  c.spec.memory_bandwidth = 3.0 * elements * 4 / add_s;

  // A convolution's forward and both gradients, as a CNN layer runs them in training.
  const at::Tensor image = at::randn({8, 64, 32, 32}).requires_grad_(), kernel = at::randn({64, 64, 3, 3}).requires_grad_();
  const double conv_s = median_seconds(3, [&] { torch::autograd::backward({at::conv2d(image, kernel, {}, 1, 1).sum()}); });
  const double conv_flops = 3.0 * 2.0 * 8 * 64 * 32 * 32 * 64 * 9;
  c.spec.conv_efficiency = std::min(1.0, conv_flops / conv_s / c.spec.fp32_flops);

  // Launch: what one op costs when it has nothing to compute, as placementd's engine runs a
  // training step (interpreter, autograd's forward record and backward), from a chain of adds on
  // one-element tensors; each counts one kernel forward and one backward.
  constexpr int chain = 64;
  std::string source = "def forward(self, x):\n";
  for (int i = 0; i < chain; ++i) source += "    x = x + 1.0\n";
  source += "    return x\n";
  torch::jit::Module module("calibration");
  module.define(source);
  const at::Tensor seed = at::ones({1});
  const OpGraph graph = capture(module, {seed}, "calibration");
  PlacedModule placed(module, graph, DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0, {}}}, 1e9, 0));
  const at::Tensor input = seed.clone().requires_grad_();
  const std::vector<c10::IValue> args = {input};
  const double step_s = median_seconds(7, [&] { torch::autograd::backward({placed.forward(args).at(0).toTensor().sum()}); });
  c.spec.launch_s = step_s / (2.0 * static_cast<double>(graph.ops.size()));
  return c;
}

}  // namespace placement
