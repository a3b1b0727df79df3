#include "planning/sim/device_presets.h"

namespace placementd::sim {

namespace {

constexpr double kT = 1e12;
constexpr double kG = 1e9;
constexpr uint64_t kGiB = 1ull << 30;

// Tensor-core figures are the dense ones: data sheets since Ampere print "with sparsity" rates,
// twice the dense rate, which training never reaches.
//
// launch_s is PyTorch eager's host cost per dispatch (dispatcher + cudaLaunchKernel), a few
// microseconds on a current server CPU; 10 us for the K40-era frameworks of the papers.
//
// compute_efficiency/memory_efficiency are the fractions of peak that large cuBLAS/cuDNN kernels
// and streaming kernels reach. They are the defaults of DeviceSpec until a GPU run re-fits them
// (docs/simulator.md, "Calibration").
placement::DeviceSpec figures(double fp32_t, double tf32_t, double bf16_t, double fp16_t,
                              double bandwidth_g, double launch_us) {
  placement::DeviceSpec s;
  s.fp32_flops = fp32_t * kT;
  s.tf32_flops = tf32_t * kT;
  s.bf16_flops = bf16_t * kT;
  s.fp16_flops = fp16_t * kT;
  s.memory_bandwidth = bandwidth_g * kG;
  s.launch_s = launch_us * 1e-6;
  return s;
}

std::vector<DevicePreset> make_presets() {
  using placement::DeviceKind;
  std::vector<DevicePreset> presets = {
      {"h100-sxm", DeviceKind::kCuda, 80 * kGiB, figures(67, 494.7, 989.4, 989.4, 3350, 5),
       "NVIDIA H100 Tensor Core GPU data sheet (2023), H100 SXM: FP32 67 TFLOPS, TF32 989 / BF16 "
       "and FP16 "
       "1979 TFLOPS with sparsity, HBM3 3.35 TB/s, 80 GB"},
      {"h100-pcie", DeviceKind::kCuda, 80 * kGiB, figures(51, 378, 756.5, 756.5, 2000, 5),
       "NVIDIA H100 Tensor Core GPU data sheet (2023), H100 PCIe: FP32 51 TFLOPS, TF32 756 / BF16 "
       "and FP16 "
       "1513 TFLOPS with sparsity, HBM2e 2.0 TB/s, 80 GB"},
      {"a100-sxm", DeviceKind::kCuda, 80 * kGiB, figures(19.5, 156, 312, 312, 2039, 5),
       "NVIDIA A100 Tensor Core GPU data sheet (2021), A100 80GB SXM: FP32 19.5 TFLOPS, TF32 156, "
       "BF16 and "
       "FP16 312 TFLOPS dense, HBM2e 2039 GB/s"},
      {"v100-sxm", DeviceKind::kCuda, 32 * kGiB, figures(15.7, 0, 0, 125, 900, 5),
       "NVIDIA Tesla V100 data sheet (2020), V100 SXM2: FP32 15.7 TFLOPS, tensor (FP16) 125 "
       "TFLOPS, no "
       "TF32 or BF16, HBM2 900 GB/s, 32 GB"},
      {"k40", DeviceKind::kCuda, 12 * kGiB, figures(4.29, 0, 0, 0, 288, 10),
       "NVIDIA Tesla K40 board specification (BD-06902-001): 4.29 TFLOPS single precision at base "
       "clock, "
       "GDDR5 288 GB/s, 12 GB; the GPU of the Hierarchical Planner's and ColocRL's experiments"},
      {"xeon-8480-2s", DeviceKind::kCpu, 512 * kGiB, figures(14.3, 0, 0, 0, 614, 8),
       "two Intel Xeon Platinum 8480+ (an H100 server's host; Intel ARK): 2 x 56 cores x 2 AVX-512 "
       "FMA "
       "units x 16 fp32 lanes x 2 FLOPs x 2.0 GHz = 14.3 TFLOPS, 2 x 8 channels DDR5-4800 = 614 "
       "GB/s; "
       "launch_s is PyTorch's per-op CPU dispatch and thread fork-join"},
  };
  for (DevicePreset& p : presets) p.spec.preset = p.name;
  return presets;
}

}  // namespace

const std::vector<DevicePreset>& device_presets() {
  static const std::vector<DevicePreset> presets = make_presets();
  return presets;
}

const DevicePreset* find_device_preset(const std::string& name) {
  for (const DevicePreset& p : device_presets())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace placementd::sim
