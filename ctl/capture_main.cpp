// placementctl-capture: a .pt2 (torch.export.save) or TorchScript model -> OpGraph JSON. A separate
// executable so that placementctl itself never loads LibTorch (that costs ~0.8 s per start);
// `placementctl capture` runs this.
//
//   placementctl-capture MODEL.pt2|MODEL.pt [--input 1x3x224x224 --input 1x40 ...] [--dtype int64]
//   [-o G.json]

#include <cstdio>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <ATen/core/ivalue.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include "placement/capture.h"
#include "placement/profiler.h"
#include "placement/serialization.h"
#include "table.h"

namespace {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('x', start);
    const std::string part =
        text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 12)
      throw std::invalid_argument("bad input shape '" + text + "' (expected e.g. 1x3x224x224)");
    shape.push_back(std::stoll(part));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"capture a model (.pt2 from torch.export.save, or TorchScript) as an OpGraph"};
  std::string model, output, dtype;
  std::vector<std::string> inputs;
  bool list = false;
  std::string profile_on;
  int profile_steps = 5;
  app.add_option("MODEL", model,
                 ".pt2 archive (torch.export.save; its weights are not read) or TorchScript file "
                 "(torch.jit.save)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--input", inputs,
                 "shape of each forward() input, e.g. 1x3x224x224 (a .pt2: default, the shapes it "
                 "was exported with)");
  app.add_option(
      "--dtype", dtype,
      "dtype of every input: float32, float64, int64 (token ids), int32 (a .pt2: default, "
      "each input's dtype as exported; TorchScript: float32)");
  app.add_option("-o,--output", output, "write the graph here (JSON); default: a summary only");
  app.add_flag("--list", list, "print every op: id, name, kind, output shape, parameter bytes");
  app.add_option("--profile", profile_on,
                 "measure each op during real training steps on this device (cpu, cuda:N)");
  app.add_option("--profile-steps", profile_steps, "measured steps (after 2 warm-up steps)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  std::string keep_profiles;
  app.add_option("--keep-profiles", keep_profiles,
                 "copy the per-op profiles of an earlier capture of the same model (same "
                 "fingerprint) instead of "
                 "measuring them: adds what this version records (op work) to an old graph file")
      ->check(CLI::ExistingFile)
      ->excludes("--profile");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& s : inputs) shapes.push_back(parse_shape(s));
    placement::OpGraph graph = placement::capture_file(model, shapes, dtype);
    if (!keep_profiles.empty()) {
      const placement::OpGraph old = placement::load_graph_file(keep_profiles);
      if (old.fingerprint() != graph.fingerprint())
        throw std::invalid_argument(
            keep_profiles + ": a different model (fingerprint " + old.fingerprint() + ", " +
            std::to_string(old.ops.size()) + " ops; this capture: " + graph.fingerprint() + ", " +
            std::to_string(graph.ops.size()) +
            " ops): capture with the inputs it was captured with, or profile anew with --profile");
      for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].profile = old.ops[i].profile;
    }
    if (!profile_on.empty()) {
      // Training steps with a mean-square loss over the first output and SGD: what is timed is
      // the model's own forward, backward and update.
      const placement::Device device = placement::parse_device_name(profile_on);
      if (device.kind == placement::DeviceKind::kCuda &&
          static_cast<int>(torch::cuda::device_count()) <= device.index)
        throw std::invalid_argument("--profile " + profile_on + ": this LibTorch sees " +
                                    std::to_string(torch::cuda::device_count()) +
                                    " CUDA device(s)");
      const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                              static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      const placement::Model loaded = placement::Model::load(model);
      if (loaded.on_meta_device())
        throw std::invalid_argument(
            model +
            ": saved on the meta device, so it has shapes but no weights: it can be "
            "captured (op work, for the cost model) but not profiled; export or trace and save "
            "it on the CPU to --profile it");
      std::vector<c10::IValue> args;
      for (const at::Tensor& t : placement::example_inputs(loaded, shapes, dtype))
        args.emplace_back(t);
      placement::PlacedModule placed(
          loaded, graph,
          placement::DeviceSet::uniform({{device.kind, device.index, memory, 1.0, std::nullopt}},
                                        1e9, 0));
      torch::optim::SGD sgd(placed.parameters(), torch::optim::SGDOptions(1e-4));
      const auto profiles = placement::profile_steps(
          placed,
          [&] {
            const at::Tensor out = placed.forward(args).at(0).toTensor();
            if (!out.requires_grad())
              throw std::invalid_argument(
                  "--profile: " + model +
                  "'s first output depends on no trained parameter, so "
                  "a training step has no backward to time; profile a model with parameters");
            out.to(at::kFloat).pow(2).mean().backward();
          },
          [&] {
            sgd.step();
            sgd.zero_grad();
          },
          {2, profile_steps});
      placement::record_profiles(graph, placed, profiles);
      double forward = 0, backward = 0, update = 0;
      for (const auto& p : profiles) {
        forward += p.forward_s;
        backward += p.backward_s;
        update += p.update_s;
      }
      std::printf(
          "profile on %s (median of %d steps): forward %.2f ms, backward %.2f ms, update %.2f ms\n",
          profile_on.c_str(), profile_steps, forward * 1e3, backward * 1e3, update * 1e3);
    }
    uint64_t params = 0, activations = 0;
    std::map<std::string, int> kinds;
    for (const auto& op : graph.ops) {
      params += op.parameter_bytes;
      activations += op.output_bytes();
      ++kinds[op.kind];
    }
    std::cout << model << ": " << graph.ops.size() << " ops, " << graph.edges.size() << " edges, "
              << placementctl::format_bytes(params) << " of parameters, "
              << placementctl::format_bytes(activations) << " of outputs, fingerprint "
              << graph.fingerprint() << "\n";
    // What the cost model will time ops by, and which kinds it only guesses at.
    double flops = 0, bytes = 0;
    std::map<std::string, int> guessed;
    for (const auto& op : graph.ops) {
      if (!op.work) continue;
      flops += op.work->forward_flops + op.work->backward_flops;
      bytes += op.work->forward_bytes + op.work->backward_bytes;
      if (op.work->estimated) ++guessed[op.kind];
    }
    std::printf("work per training step (forward + backward): %.3g GFLOP, %.3g GB moved\n",
                flops / 1e9, bytes / 1e9);
    if (!guessed.empty()) {
      std::string kinds_text;
      int count = 0;
      for (const auto& [kind, n] : guessed) {
        kinds_text += (kinds_text.empty() ? "" : ", ") + kind + " (" + std::to_string(n) + ")";
        count += n;
      }
      std::cout << count
                << " ops of kinds the cost model has no formula for, estimated as memory-bound: "
                << kinds_text << "\n";
    }
    if (list)
      for (const auto& op : graph.ops) {
        std::cout << op.id << "\t" << op.name << "\t" << op.kind << "\t";
        if (!op.outputs.empty())
          for (size_t i = 0; i < op.outputs[0].shape.size(); ++i)
            std::cout << (i ? "x" : "") << op.outputs[0].shape[i];
        std::cout << "\t" << op.parameter_bytes << "\n";
      }
    if (!output.empty()) {
      placement::write_json_file(output, placement::to_json(graph));
      std::cout << "wrote " << output << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "placementctl-capture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
