#pragma once
// A model exported at test time by tests/models/export_models.py (into EXPORT_DIR) with its eager
// reference run: what the export front end's and the residence tests start from.

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace placement::testing {

inline std::string path_of(const std::string& file) { return std::string(EXPORT_DIR) + "/" + file; }

/// What export_models.py wrote for a model: its inputs, eager PyTorch's losses and end state.
struct Reference {
  nlohmann::json record;
  std::string blob;

  static Reference load(const std::string& name) {
    Reference r;
    std::ifstream json(path_of(name + ".reference.json"));
    r.record = nlohmann::json::parse(json);
    std::ifstream bin(path_of(name + ".reference.bin"), std::ios::binary);
    r.blob.assign(std::istreambuf_iterator<char>(bin), {});
    return r;
  }

  at::Tensor tensor(const nlohmann::json& entry) const {
    const std::string dtype = entry["dtype"];
    const c10::ScalarType type = dtype == "float32" ? at::kFloat
                                 : dtype == "int64" ? at::kLong
                                                    : at::kDouble;
    at::Tensor t =
        at::empty(entry["shape"].get<std::vector<int64_t>>(), at::TensorOptions().dtype(type));
    const size_t bytes = entry["bytes"];
    EXPECT_EQ(bytes, static_cast<size_t>(t.numel()) * t.element_size());
    std::memcpy(t.data_ptr(), blob.data() + entry["offset"].get<size_t>(), bytes);
    return t;
  }

  std::vector<c10::IValue> inputs(const std::string& key) const {
    std::vector<c10::IValue> out;
    for (const auto& entry : record[key]) out.emplace_back(tensor(entry));
    return out;
  }
};

inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.detach().cpu().contiguous();
  const at::Tensor y = b.detach().cpu().contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(),
                     static_cast<size_t>(x.numel()) * x.element_size()) == 0;
}

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// export_models.py's loss: the floating outputs' t.float().pow(2).mean(), summed left to right.
inline at::Tensor loss_of(const std::vector<c10::IValue>& outputs) {
  at::Tensor loss;
  for (const c10::IValue& v : outputs) {
    if (!v.isTensor() || !v.toTensor().is_floating_point()) continue;
    const at::Tensor term = v.toTensor().to(at::kFloat).pow(2).mean();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

}  // namespace placement::testing
