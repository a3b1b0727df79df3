// placementctl-calibrate: measures this machine's CPU as LibTorch uses it and prints it as a
// topology file's [[device]] entry for the cost model (docs/simulator.md). A separate executable
// so that placementctl itself never loads LibTorch; `placementctl calibrate` runs this.
//
//   placementctl-calibrate [--threads N] [-o cpu.toml]

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>

#include <torch/version.h>
#include <CLI/CLI.hpp>

#include "placement/calibration.h"
#include "placement/serialization.h"

int main(int argc, char** argv) {
  CLI::App app{
      "measure this CPU for the simulator's cost model; prints a topology [[device]] entry"};
  int threads = 0;
  std::string output;
  app.add_option("--threads", threads,
                 "LibTorch intra-op threads to measure with (default: LibTorch's, as jobs run)")
      ->check(CLI::Range(1, 4096));
  app.add_option("-o,--output", output,
                 "also write the entry to this file (a topology with this CPU alone)");
  CLI11_PARSE(app, argc, argv);
  try {
    const placement::CpuCalibration c = placement::calibrate_cpu(threads);
    const double memory_gib = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                              static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                              (1024.0 * 1024.0 * 1024.0);
    char date[16];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%d", std::localtime(&now));
    char text[1024];
    std::snprintf(
        text, sizeof(text),
        "# This machine's CPU as LibTorch %s uses it with %d intra-op threads, measured by\n"
        "# placementctl calibrate on %s: achieved rates (a 1024x1024 matrix product, an add over\n"
        "# 64 MiB tensors, training steps of 8 and 32 tiny linear + ReLU layers through "
        "placementd's\n"
        "# engine, three convolutions and an LSTM at two lengths trained, a 3x3 max pooling), so "
        "the\n"
        "# efficiencies are 1 but the convolutions' and pooling's.\n"
        "[[device]]\n"
        "name = \"cpu:0\"\n"
        "memory_gib = %.1f\n"
        "fp32_tflops = %.4g\n"
        "memory_bandwidth_gbs = %.4g\n"
        "launch_us = %.3g\n"
        "step_us = %.3g\n"
        "compute_efficiency = 1.0\n"
        "memory_efficiency = 1.0\n"
        "conv_efficiency = %.3g\n"
        "conv_layout_gbs = %.4g\n"
        "pool_efficiency = %.3g\n"
        "rnn_layer_us = %.3g\n"
        "rnn_step_us = %.3g\n",
        TORCH_VERSION, c.threads, date, memory_gib, c.spec.fp32_flops / 1e12,
        c.spec.memory_bandwidth / 1e9, c.spec.launch_s * 1e6, c.spec.step_s * 1e6,
        c.spec.conv_efficiency, c.spec.conv_layout_bandwidth / 1e9, c.spec.pool_efficiency,
        c.spec.rnn_layer_s * 1e6, c.spec.rnn_step_s * 1e6);
    std::cout << text;
    if (!output.empty()) placement::write_file_atomically(output, text);
  } catch (const std::exception& e) {
    std::cerr << "placementctl-calibrate: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
