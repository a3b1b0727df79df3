#include "placement/calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/optim/sgd.h>

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

  // Dispatch and the step's own cost: training steps (loss, backward, SGD, zero_grad) of 8 and of
  // 32 tiny linear + ReLU layers through placementd's engine, where nothing is left to compute. The
  // slope over the dispatches the cost model counts (interpreter, dispatcher, autograd's nodes and
  // gradient accumulation, the optimizer's per-op update, the small GEMMs' setup) is the launch
  // cost; what remains at zero layers is the loop's own (DeviceSpec::step_s).
  auto tiny_mlp_step = [&](int layers) {
    torch::jit::Module mlp("calibration");
    std::string source = "def forward(self, x):\n";
    for (int i = 0; i < layers; ++i) {
      const std::string w = "w" + std::to_string(i), b = "b" + std::to_string(i);
      mlp.register_parameter(w, (at::randn({8, 8}) * 0.3).requires_grad_(), false);
      mlp.register_parameter(b, at::zeros({8}).requires_grad_(), false);
      source += "    x = torch.relu(torch.linear(x, self." + w + ", self." + b + "))\n";
    }
    source += "    return x\n";
    mlp.define(source);
    const at::Tensor seed = at::ones({1, 8});
    const OpGraph graph = capture(mlp, {seed}, "calibration");
    double dispatches = 0;
    for (const Op& op : graph.ops)
      dispatches +=
          op.work->forward_kernels + op.work->backward_kernels + (op.parameter_bytes > 0 ? 1 : 0);
    PlacedModule placed(mlp, graph,
                        DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0, {}}}, 1e9, 0));
    torch::optim::SGD sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
    const std::vector<c10::IValue> args = {seed};
    const double seconds = median_seconds(9, [&] {
      torch::autograd::backward({placed.forward(args).at(0).toTensor().pow(2).mean()});
      sgd.step();
      sgd.zero_grad();
    });
    return std::pair{dispatches, seconds};
  };
  const auto [few_dispatches, few_s] = tiny_mlp_step(8);
  const auto [many_dispatches, many_s] = tiny_mlp_step(32);
  const double slope = (many_s - few_s) / (many_dispatches - few_dispatches);
  c.spec.launch_s = slope > 0 ? slope : many_s / many_dispatches;  // noise swallowed the slope
  c.spec.step_s = std::max(0.0, many_s - many_dispatches * c.spec.launch_s);

  // Convolutions, forward and both gradients: seconds beyond their dispatches for the work capture
  // counts. Three layers of different balance (bound by arithmetic, by activations, by 9 MiB of
  // weights) fit FLOPs / rate + bytes / layout bandwidth, by least squares on the relative error
  // so that no one of them decides alone.
  struct Conv {
    double flops, bytes, seconds;
  };
  auto measure_conv = [&](std::vector<int64_t> image_shape, std::vector<int64_t> kernel_shape) {
    torch::jit::Module conv("calibration_conv");
    conv.register_parameter("weight", (at::randn(kernel_shape) * 0.05).requires_grad_(), false);
    conv.define("def forward(self, x):\n    return torch.conv2d(x, self.weight, None, 1, 1)\n");
    const at::Tensor image = at::randn(image_shape);
    const Op op = capture(conv, {image}, "calibration").ops.at(0);
    const at::Tensor input = image.clone().requires_grad_();
    const double s = median_seconds(7, [&] {
      torch::autograd::backward({conv.forward({input}).toTensor().sum()});
      input.mutable_grad().reset();
      for (const at::Tensor& p : conv.parameters()) p.mutable_grad().reset();
    });
    const int kernels = op.work->forward_kernels + op.work->backward_kernels;
    return Conv{op.work->forward_flops + op.work->backward_flops,
                op.work->forward_bytes + op.work->backward_bytes,
                std::max(0.0, s - kernels * c.spec.launch_s)};
  };
  const Conv compute = measure_conv({8, 64, 32, 32}, {64, 64, 3, 3});
  const Conv convs[] = {compute, measure_conv({16, 64, 16, 16}, {64, 64, 1, 1}),
                        measure_conv({1, 512, 2, 2}, {512, 512, 3, 3})};
  double ff = 0, fb = 0, bb = 0, f1 = 0,
         b1 = 0;  // normal equations of rows (flops, bytes) / seconds = 1
  for (const Conv& k : convs) {
    const double f = k.flops / k.seconds, b = k.bytes / k.seconds;
    ff += f * f, fb += f * b, bb += b * b, f1 += f, b1 += b;
  }
  const double det = ff * bb - fb * fb;
  const double per_flop = (f1 * bb - b1 * fb) / det;
  const double per_byte = (ff * b1 - fb * f1) / det;
  if (std::isfinite(per_flop) && std::isfinite(per_byte) && per_flop > 0 && per_byte > 0) {
    c.spec.conv_efficiency = std::min(1.0, 1.0 / per_flop / c.spec.fp32_flops);
    c.spec.conv_layout_bandwidth = 1.0 / per_byte;
  } else {
    // No positive layout cost fits (the convolutions run at their roofline): the first one's rate.
    c.spec.conv_efficiency = std::min(1.0, compute.flops / compute.seconds / c.spec.fp32_flops);
  }

  // A fused LSTM trained at two sequence lengths: what it costs beyond its dispatches and its
  // arithmetic is the library's, split into a cost per layer call and one per time step (forward;
  // backward counts twice, as the cost model charges it).
  auto lstm_library_s = [&](int64_t steps) {
    constexpr int64_t hidden = 64, batch = 4;
    torch::jit::Module lstm("calibration_lstm");
    for (const char* name : {"w_ih", "w_hh"})
      lstm.register_parameter(name, (at::randn({4 * hidden, hidden}) * 0.1).requires_grad_(),
                              false);
    for (const char* name : {"b_ih", "b_hh"})
      lstm.register_parameter(name, at::zeros({4 * hidden}).requires_grad_(), false);
    lstm.define(
        "def forward(self, x, h, c):\n"
        "    y, hn, cn = torch.lstm(x, [h, c], [self.w_ih, self.w_hh, self.b_ih, self.b_hh], True, "
        "1, 0.0, True, False, False)\n"
        "    return y\n");
    const at::Tensor x = at::randn({steps, batch, hidden}), h = at::zeros({1, batch, hidden});
    const Op op = capture(lstm, {x, h, h}, "calibration").ops.at(0);
    const double s = median_seconds(7, [&] {
      torch::autograd::backward({lstm.forward({x, h, h}).toTensor().sum()});
      for (const at::Tensor& p : lstm.parameters()) p.mutable_grad().reset();
    });
    const OpWork& w = *op.work;
    auto roofline = [&](double flops, double bytes) {
      return std::max(flops / c.spec.fp32_flops, bytes / c.spec.memory_bandwidth);
    };
    const double counted = roofline(w.forward_flops, w.forward_bytes) +
                           roofline(w.backward_flops, w.backward_bytes) +
                           (w.forward_kernels + w.backward_kernels) * c.spec.launch_s;
    return std::pair{std::max(0.0, s - counted) / 3.0, w};  // forward once, backward twice
  };
  const auto [short_s, short_work] = lstm_library_s(4);
  const auto [long_s, long_work] = lstm_library_s(32);
  // A step cost of exactly 0 would mean "two launches per step" (the GPU default): keep it
  // positive.
  c.spec.rnn_step_s =
      std::max(1e-9, (long_s - short_s) / (long_work.rnn_steps - short_work.rnn_steps));
  c.spec.rnn_layer_s =
      std::max(0.0, short_s - short_work.rnn_steps * c.spec.rnn_step_s) / short_work.rnn_layers;

  // Max pooling forward, as in training (it records the maxima's indices): per window element.
  const at::Tensor feature_map = at::randn({8, 32, 32, 32}).requires_grad_();
  const double pool_s = median_seconds(7, [&] {
    at::max_pool2d(feature_map, {3, 3}, {1, 1}, {1, 1});
  });
  const double window_elements = 8.0 * 32 * 32 * 32 * 9;
  c.spec.pool_efficiency = std::clamp(
      window_elements / std::max(pool_s - c.spec.launch_s, 1e-9) / c.spec.fp32_flops, 1e-6, 1.0);
  return c;
}

}  // namespace placement
