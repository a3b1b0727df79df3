#include <gtest/gtest.h>

#include "planning/sim/cost_model.h"
#include "planning/sim/device_presets.h"

namespace placementd::sim {
namespace {

using placement::MathClass;
using placement::OpWork;

const placement::DeviceSpec& preset(const char* name) {
  const DevicePreset* p = find_device_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return p->spec;
}

// A device given by achieved rates, as placementctl calibrate measures one: the efficiencies are 1.
placement::DeviceSpec achieved(double flops, double bandwidth) {
  placement::DeviceSpec spec;
  spec.fp32_flops = flops;
  spec.memory_bandwidth = bandwidth;
  spec.compute_efficiency = 1.0;
  spec.memory_efficiency = 1.0;
  return spec;
}

TEST(CostModel, PyTorchsDefaultMathModesPickThePeak) {
  const auto& h100 = preset("h100-sxm");
  const MathModes defaults;
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kConv, "float32", defaults), h100.tf32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kMatmul, "float32", defaults), h100.fp32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kVector, "float32", defaults), h100.fp32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kMatmul, "bfloat16", defaults), h100.bf16_flops);
  MathModes tf32;
  tf32.matmul_tf32 = true;
  tf32.conv_tf32 = false;
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kMatmul, "float32", tf32), h100.tf32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(h100, MathClass::kConv, "float32", tf32), h100.fp32_flops);
  // No tensor cores for the type: the vector units' rate.
  const auto& v100 = preset("v100-sxm");
  EXPECT_DOUBLE_EQ(peak_flops(v100, MathClass::kMatmul, "bfloat16", defaults), v100.fp32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(v100, MathClass::kConv, "float32", defaults), v100.fp32_flops);
  EXPECT_DOUBLE_EQ(peak_flops(v100, MathClass::kMatmul, "float16", defaults), v100.fp16_flops);
}

TEST(CostModel, RooflineTakesTheSlowerOfArithmeticAndMemoryPlusLaunches) {
  placement::DeviceSpec spec;
  spec.fp32_flops = 1e12;
  spec.memory_bandwidth = 1e11;
  spec.launch_s = 1e-5;
  spec.compute_efficiency = 0.5;
  spec.memory_efficiency = 0.5;
  OpWork w;
  w.math = MathClass::kMatmul;
  w.forward_flops = 1e9;   // 2 ms at 0.5 TFLOP/s
  w.forward_bytes = 1e6;   // 20 us at 50 GB/s
  w.backward_flops = 1e6;  // 2 us
  w.backward_bytes = 1e8;  // 2 ms
  w.forward_kernels = 1;
  w.backward_kernels = 3;
  const PredictedTime t = predict_op_time(w, spec, {});
  EXPECT_NEAR(t.forward_s, 2e-3 + 1e-5, 1e-12);
  EXPECT_NEAR(t.backward_s, 2e-3 + 3e-5, 1e-12);
  // Small enough, only the launch is left.
  OpWork tiny;
  tiny.forward_flops = 10;
  tiny.forward_bytes = 10;
  EXPECT_NEAR(predict_op_time(tiny, spec, {}).forward_s, 1e-5, 1e-9);
}

TEST(CostModel, ALayoutConvertingLibraryPaysAConvolutionsBytesOnTopOfItsArithmetic) {
  placement::DeviceSpec cpu = achieved(1e11, 2e10);
  cpu.conv_efficiency = 0.5;
  OpWork conv;
  conv.math = MathClass::kConv;
  conv.forward_flops = 1e8;  // 2 ms at 50 GFLOP/s
  conv.forward_bytes = 1e7;  // 0.5 ms at 20 GB/s: under the arithmetic
  conv.forward_kernels = 0;
  EXPECT_NEAR(predict_op_time(conv, cpu, {}).forward_s, 2e-3, 1e-12)
      << "the roofline without a layout rate";
  cpu.conv_layout_bandwidth = 5e9;  // 2 ms more
  EXPECT_NEAR(predict_op_time(conv, cpu, {}).forward_s, 4e-3, 1e-12);
  // Other ops keep the roofline.
  OpWork product = conv;
  product.math = MathClass::kMatmul;
  EXPECT_NEAR(predict_op_time(product, cpu, {}).forward_s, 1e-3, 1e-12);
}

TEST(CostModel, PoolingRunsAtItsOwnFractionOfThePeakWhereASpecGivesOne) {
  placement::DeviceSpec cpu = achieved(1e11, 1e12);
  OpWork pool;
  pool.math = MathClass::kPool;
  pool.forward_flops = 1e6;
  pool.forward_kernels = 0;
  EXPECT_NEAR(predict_op_time(pool, cpu, {}).forward_s, 1e-5, 1e-12);
  cpu.pool_efficiency = 0.01;
  EXPECT_NEAR(predict_op_time(pool, cpu, {}).forward_s, 1e-3, 1e-12);
}

TEST(CostModel, AFusedRnnPaysItsLibraryPerLayerCallAndPerStepBackwardTwice) {
  OpWork lstm;
  lstm.math = MathClass::kMatmul;
  lstm.forward_kernels = 0;
  lstm.backward_kernels = 0;
  lstm.rnn_layers = 2;
  lstm.rnn_steps = 2 * 50;
  // A GPU spec without RNN figures: cuDNN's two launches per step.
  placement::DeviceSpec gpu = achieved(1e14, 1e12);
  gpu.launch_s = 5e-6;
  EXPECT_NEAR(predict_op_time(lstm, gpu, {}).forward_s, 100 * 2 * 5e-6, 1e-12);
  EXPECT_NEAR(predict_op_time(lstm, gpu, {}).backward_s, 2 * 100 * 2 * 5e-6, 1e-12);
  // A CPU as calibrated: a long setup per call, cheap steps.
  placement::DeviceSpec cpu = gpu;
  cpu.rnn_layer_s = 1e-4;
  cpu.rnn_step_s = 1e-6;
  EXPECT_NEAR(predict_op_time(lstm, cpu, {}).forward_s, 2 * 1e-4 + 100 * 1e-6, 1e-12);
  EXPECT_NEAR(predict_op_time(lstm, cpu, {}).backward_s, 2 * (2 * 1e-4 + 100 * 1e-6), 1e-12);
  // Other ops pay none of it.
  OpWork product = lstm;
  product.rnn_layers = product.rnn_steps = 0;
  EXPECT_DOUBLE_EQ(predict_op_time(product, cpu, {}).forward_s, 0.0);
}

TEST(CostModel, UpdateStreamsTheParametersAsOftenAsPyTorchsForeachOptimizerDoes) {
  const placement::DeviceSpec spec = achieved(1e12, 1e9);
  EXPECT_DOUBLE_EQ(predict_update_time(1000000, 2.0, spec), 18e-3);  // Adam
  EXPECT_DOUBLE_EQ(predict_update_time(1000000, 1.0, spec), 8e-3);   // SGD with momentum
  EXPECT_DOUBLE_EQ(predict_update_time(1000000, 0.0, spec), 3e-3);   // plain SGD
  EXPECT_DOUBLE_EQ(predict_update_time(0, 2.0, spec), 0.0);
}

// The refit's launch factor moves exactly this share: what changes in an op's predicted times
// when the spec's launch cost does, for a roofline op, a fused RNN with and without a per-step
// figure, and the optimizer's update with and without parameters.
TEST(CostModel, TheLaunchShareIsWhatALaunchCostOffByAFactorChanges) {
  OpWork conv;
  conv.math = MathClass::kConv;
  conv.forward_flops = 1e9;
  conv.forward_bytes = 1e7;
  conv.backward_flops = 2e9;
  conv.backward_bytes = 2e7;
  conv.forward_kernels = 3;
  conv.backward_kernels = 5;
  OpWork lstm;
  lstm.math = MathClass::kMatmul;
  lstm.forward_kernels = 2;
  lstm.backward_kernels = 4;
  lstm.rnn_layers = 2;
  lstm.rnn_steps = 100;
  placement::DeviceSpec stepless = preset("h100-sxm");
  stepless.rnn_step_s = 0.0;
  placement::DeviceSpec stepped = stepless;
  stepped.rnn_step_s = 3e-6;
  stepped.rnn_layer_s = 2e-5;  // a library's setup per call: no launch
  for (const placement::DeviceSpec& spec : {stepless, stepped, preset("xeon-8480-2s")})
    for (const OpWork& work : {conv, lstm})
      for (uint64_t parameters : {uint64_t{0}, uint64_t{4000000}}) {
        placement::DeviceSpec slow = spec;
        slow.launch_s *= 3.0;
        const PredictedTime a = predict_op_time(work, spec, {});
        const PredictedTime b = predict_op_time(work, slow, {});
        const LaunchShare share = launch_share(work, parameters, spec);
        EXPECT_NEAR(b.forward_s - a.forward_s, 2.0 * share.forward_s, 1e-15);
        EXPECT_NEAR(b.backward_s - a.backward_s, 2.0 * share.backward_s, 1e-15);
        EXPECT_NEAR(
            predict_update_time(parameters, 2.0, slow) - predict_update_time(parameters, 2.0, spec),
            2.0 * share.update_s, 1e-15);
        EXPECT_GT(share.forward_s, 0.0);
      }
}

TEST(CostModel, EveryPresetIsAValidSpecWithASource) {
  for (const DevicePreset& p : device_presets()) {
    placement::DeviceSet set =
        placement::DeviceSet::uniform({{p.kind, 0, p.memory_bytes, 1.0, p.spec}}, 1e9, 0);
    EXPECT_NO_THROW(set.validate()) << p.name;
    EXPECT_EQ(p.spec.preset, p.name);
    EXPECT_FALSE(p.source.empty()) << p.name;
  }
  // Newer GPUs are faster at everything the model looks at.
  EXPECT_GT(preset("h100-sxm").tf32_flops, preset("a100-sxm").tf32_flops);
  EXPECT_GT(preset("a100-sxm").memory_bandwidth, preset("v100-sxm").memory_bandwidth);
  EXPECT_GT(preset("v100-sxm").fp32_flops, preset("k40").fp32_flops);
}

}  // namespace
}  // namespace placementd::sim
