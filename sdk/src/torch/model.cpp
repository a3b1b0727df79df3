#include "placement/model.h"

#include <fstream>

#include <torch/csrc/jit/serialization/import.h>

#include "export_frontend.h"
#include "op_program.h"
#include "placement/capture_error.h"
#include "torchscript_frontend.h"

namespace placement {

Model Model::from_torchscript(const torch::jit::Module& module) {
  return Model(std::make_shared<const detail::OpProgram>(detail::from_torchscript(module)));
}

Model Model::load_exported(const std::string& path, bool weights) {
  return Model(std::make_shared<const detail::OpProgram>(detail::load_pt2(path, weights)));
}

Model Model::from_exported_json(const std::string& json,
                                const std::map<std::string, at::Tensor>& tensors,
                                const std::string& origin) {
  return Model(
      std::make_shared<const detail::OpProgram>(detail::from_export(json, tensors, origin)));
}

Model Model::load(const std::string& path) {
  if (!std::ifstream(path).good()) throw CaptureError(path + ": cannot open the file");
  if (detail::is_pt2(path)) return load_exported(path);
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const auto cut = message.find('\n'); cut != std::string::npos) message.resize(cut);
    throw CaptureError(
        path +
        ": neither a .pt2 archive (torch.export.save) nor a TorchScript file (torch.jit.save): " +
        message);
  }
  try {
    return from_torchscript(module);
  } catch (const CaptureError& e) {
    throw CaptureError(path + ": " + e.what());
  }
}

const std::string& Model::frontend() const { return program_->frontend; }
size_t Model::num_inputs() const { return program_->inputs.size(); }
const std::vector<at::Tensor>& Model::parameters() const { return program_->parameters; }
std::vector<std::pair<std::string, at::Tensor>> Model::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < program_->parameters.size(); ++i)
    out.emplace_back(program_->parameter_names.at(i), program_->parameters[i]);
  return out;
}
const std::vector<std::pair<std::string, at::Tensor>>& Model::named_buffers() const {
  return program_->buffers;
}

bool Model::on_meta_device() const {
  for (const at::Tensor& t : program_->parameters)
    if (t.is_meta()) return true;
  for (const auto& [name, t] : program_->buffers)
    if (t.is_meta()) return true;
  return false;
}

std::vector<c10::IValue> Model::forward(const std::vector<c10::IValue>& inputs) const {
  return program_->run(inputs);
}

}  // namespace placement
