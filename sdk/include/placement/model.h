#pragma once
// A model as placementd's engine runs it: an op program of our own, built by one of two front ends
// (torch.export, the default, or TorchScript while upstream ships it), and the model's own
// parameters and buffers. Implemented in libplacement_torch; LibTorch types are only
// forward-declared here.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "placement/torch_fwd.h"

namespace placement {

namespace detail {
class OpProgram;
}

class Model {
 public:
  /// A TorchScript module (torch.jit.trace / torch.jit.script). Shares the module's tensors.
  static Model from_torchscript(const torch::jit::Module& module);
  /// An ExportedProgram saved with torch.export.save (a .pt2 archive), its weights read from the
  /// archive. `weights = false` reads none: parameters and buffers are meta tensors of their shapes
  /// (enough to capture a model larger than this machine's memory). Errors name the file and, for a
  /// node that cannot run here, the node and its source line.
  static Model load_exported(const std::string& path, bool weights = true);
  /// An ExportedProgram serialized to JSON (torch._export.serde.serialize's exported_program bytes)
  /// and the tensors its parameters, buffers and constants are, by their names (the module's own:
  /// what the optimizer and state_dict() see). `origin` names it in errors.
  static Model from_exported_json(const std::string& json,
                                  const std::map<std::string, at::Tensor>& tensors,
                                  const std::string& origin);
  /// A .pt2 archive or a TorchScript file, told apart by their contents.
  static Model load(const std::string& path);

  /// "export" or "torchscript".
  const std::string& frontend() const;
  /// How many inputs forward() takes (a torch.export program's flattened inputs).
  size_t num_inputs() const;
  /// The trainable parameters, each once.
  const std::vector<at::Tensor>& parameters() const;
  /// The same with their names ("layer1.0.conv1.weight").
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  /// The buffers (batch norm's running statistics ...) with their names.
  const std::vector<std::pair<std::string, at::Tensor>>& named_buffers() const;
  /// Whether its parameters or buffers are on the meta device (shapes without storage).
  bool on_meta_device() const;
  /// Runs the model op by op with every op where its inputs are, as plain PyTorch would.
  std::vector<c10::IValue> forward(const std::vector<c10::IValue>& inputs) const;

  const detail::OpProgram& program() const { return *program_; }

 private:
  explicit Model(std::shared_ptr<const detail::OpProgram> program) : program_(std::move(program)) {}
  std::shared_ptr<const detail::OpProgram> program_;
};

}  // namespace placement
