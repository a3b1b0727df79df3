#pragma once
// The training loop both example jobs share: load a model (.pt2 or TorchScript), attach it to
// placementd, train on synthetic batches for --steps, print progress and a summary of what
// placementd found.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/script.h>

namespace examples {

struct LiveOptions {
  std::string model;  // .pt2 (torch.export.save) or TorchScript file
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
  /// A profiled capture of the model (placementctl capture --profile -o FILE) to upload with the
  /// graph.
  std::string profiles_file;
  /// Write every step's loss here (hex floats, one per line) to compare runs bitwise.
  std::string losses_file;
  /// Write the placement id each step ran under here, one a line (replicas compare them).
  std::string placements_file;
  /// Where every parameter lives (its home, where its gradient and Adam's state live and its
  /// step runs), "DEVICE" or "DEVICE:stream"; empty: where its first op runs. Ops on another device
  /// read it through a copy kept there between steps, or with ":stream" fetched for each use.
  std::string home_parameters;
  /// Data-parallel replicas (torchrun's environment): how long a collective may wait for the
  /// others.
  int replica_timeout_ms = 60000;
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

/// What differs between the example programs: names for --help and the messages, --job's default,
/// and the model's data.
struct ExampleProgram {
  std::string name;         // the binary's name: "train_gnmt"
  std::string description;  // first line of --help
  std::string job;          // --job's default
  /// Called after the options are parsed and torch is seeded with --seed.
  std::function<ExampleModel(const LiveOptions& options)> make_model;
};

/// The whole program of an example job: parses the common options (command_line.h's conventions:
/// --help, usage errors with status 2, a failure is "<name>: <message>" with status 1), builds the
/// model's data and trains it. Returns the process exit status.
int live_main(int argc, char** argv, const ExampleProgram& program);

}  // namespace examples
