#pragma once
// A model traced at test time by tests/models/make_models.py (into MODEL_DIR), loaded with its
// example inputs and its capture: what the engine, optimizer-state and GPU tests start from.

#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/serialization/import.h>
#include <nlohmann/json.hpp>

#include "placement/capture.h"

namespace placement::testing {

struct TracedModel {
  torch::jit::Module module;
  std::vector<c10::IValue> inputs;
  OpGraph graph;
};

/// Loads MODEL_DIR/NAME.pt with inputs drawn after seeding 1, so two loads train alike.
inline TracedModel load_traced_model(const std::string& name) {
  // The plain module runs through the JIT's simple executor so that its gradients come from the
  // same eager autograd formulas the placed engine uses (the optimizing executor may substitute
  // symbolic derivatives).
  torch::jit::setGraphExecutorOptimize(false);
  std::ifstream in(std::string(MODEL_DIR) + "/" + name + ".json");
  const auto spec = nlohmann::json::parse(in);
  TracedModel m;
  m.module = torch::jit::load(std::string(MODEL_DIR) + "/" + name + ".pt");
  at::manual_seed(1);
  const std::vector<at::Tensor> tensors =
      example_inputs(spec["inputs"].get<std::vector<std::vector<int64_t>>>(), spec["dtype"]);
  for (const at::Tensor& t : tensors) m.inputs.emplace_back(t);
  m.graph = capture(m.module, tensors, name);
  return m;
}

/// `n` logical CPU devices with 16 GiB each.
inline DeviceSet logical_cpus(int n) {
  std::vector<Device> list;
  for (int i = 0; i < n; ++i) list.push_back({DeviceKind::kCpu, i, 1ull << 34, 1.0});
  return DeviceSet::uniform(list, 10e9, 1e-5);
}

/// The weights nn.LSTM / GRU / RNN keep per layer, which a traced model passes to its op in a list.
inline bool is_recurrent_weight(const std::string& name) {
  for (const char* part : {"weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l"})
    if (name.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace placement::testing
