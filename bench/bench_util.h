#pragma once
// What several benchmarks need: medians, and the test models traced into a fresh directory and
// loaded from it.

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef MODEL_PYTHON
#include <fstream>

#include <torch/csrc/jit/serialization/import.h>
#include <nlohmann/json.hpp>

#include "placement/capture.h"
#endif

namespace placement::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median wall time of `measured` calls of `step`, after `warmup` untimed ones.
template <typename Step>
double median_step_seconds(Step&& step, int warmup = 2, int measured = 7) {
  std::vector<double> times;
  for (int i = 0; i < warmup + measured; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    if (i >= warmup)
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(times);
}

/// A new directory /tmp/PREFIX.XXXXXX (mkdtemp(3) fills in the X's; keep PREFIX short where a
/// Unix socket goes inside: its path has at most 108 bytes). Throws std::runtime_error naming it.
inline std::string make_temp_dir(const std::string& prefix) {
  std::string dir = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr)
    throw std::runtime_error("cannot create a directory under /tmp for " + prefix + ": " +
                             std::strerror(errno));
  return dir;
}

#ifdef MODEL_PYTHON  // defined for the benchmarks that trace models (bench/CMakeLists.txt)
/// Traces tests/models/make_models.py into a new directory under /tmp (with MODEL_PYTHON, the
/// Python whose torch the build links) and returns it; throws std::runtime_error saying which step
/// failed.
inline std::string trace_models(const std::string& source_dir, const std::string& prefix) {
  const std::string dir = make_temp_dir(prefix);
  const std::string cmd = std::string(MODEL_PYTHON) + " " + source_dir +
                          "/tests/models/make_models.py " + dir + " > /dev/null";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("tracing the test models failed: " + cmd);
  return dir;
}

/// A model as tests/models/make_models.py writes it: DIR/NAME.pt and its example inputs, made from
/// the shapes and dtype DIR/NAME.json names.
struct TracedModel {
  torch::jit::Module module;
  std::vector<at::Tensor> inputs;
};

/// Loads `name` from `dir`; throws std::runtime_error naming the file that is missing or
/// unreadable, rather than a JSON parse error about an empty document.
inline TracedModel load_traced_model(const std::string& dir, const std::string& name) {
  const std::string spec_file = dir + "/" + name + ".json";
  std::ifstream in(spec_file);
  if (!in)
    throw std::runtime_error(spec_file +
                             ": cannot read it (trace the model with tests/models/make_models.py)");
  std::vector<std::vector<int64_t>> shapes;
  std::string dtype;
  try {
    const nlohmann::json spec = nlohmann::json::parse(in);
    shapes = spec.at("inputs").get<std::vector<std::vector<int64_t>>>();
    dtype = spec.at("dtype").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(spec_file + ": " + e.what());
  }
  return {torch::jit::load(dir + "/" + name + ".pt"), placement::example_inputs(shapes, dtype)};
}
#endif

}  // namespace placement::bench
