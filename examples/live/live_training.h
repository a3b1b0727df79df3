#pragma once
// The training loop both example jobs share: load a TorchScript model, attach it to placementd,
// train on synthetic batches for --steps, print progress and a summary of what placementd found.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/script.h>

namespace examples {

struct LiveOptions {
  std::string model;  // TorchScript file
  std::string job;    // job name shown by placementctl
  std::string socket;
  std::vector<std::string> devices;
  /// Memory per device for placementd's memory model, GiB (0: CPU devices share the host's; CUDA
  /// devices need it).
  double memory_gib = 0.0;
  int64_t steps = 300;
  int64_t log_every = 50;
  uint64_t seed = 0;
  bool use_daemon = true;
  /// "first" (every op on the first device) or "interleaved" (consecutive ops alternate devices:
  /// a poor start, so a CPU-only machine has something to improve).
  std::string start = "first";
  /// A profiled capture of the model (placementctl capture --profile -o FILE) to upload with the graph.
  std::string profiles_file;
  /// Write every step's loss here (hex floats, one per line) to compare runs bitwise.
  std::string losses_file;
  double learning_rate = 1e-3;
};

/// A synthetic batch for step `step`: the model's inputs and what the loss needs.
struct Batch {
  std::vector<c10::IValue> inputs;
  at::Tensor target;
};

struct ExampleModel {
  /// Example inputs for capture.
  std::vector<at::Tensor> example_inputs;
  std::function<Batch(int64_t step)> batch;
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;
};

/// Parses the common flags (`name` and `description` for --help); returns false to exit with `*code`.
bool parse_options(int argc, char** argv, const std::string& name, const std::string& description,
                   LiveOptions* options, int* code);

/// Runs the job; returns the process exit code.
int run_live(const LiveOptions& options, const ExampleModel& model);

}  // namespace examples
