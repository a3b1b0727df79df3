#pragma once
// torch.export -> OpProgram. An ExportedProgram in training IR (torch.export.export(...,
// strict=False)): export_archive.cpp reads a .pt2 (the program record and the weights),
// export_schema.h its schema types into LibTorch's, export_builder.cpp its graph into the op
// program.

#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "op_program.h"

namespace placement::detail {

/// The schema major version this reader understands (torch/_export/serde/schema.py's
/// SCHEMA_VERSION[0] of the torch this SDK is built against).
constexpr int kExportSchemaMajor = 8;

/// `json`: the serialized ExportedProgram (models/model.json of a .pt2). `tensors`: parameters,
/// buffers and tensor constants by name. `origin` names the source in errors.
OpProgram from_export(const std::string& json, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& origin);

/// Reads a .pt2 archive (torch.export.save): the program and, with `weights`, its parameters,
/// buffers and constants; without, those are meta tensors of their recorded shapes.
OpProgram load_pt2(const std::string& path, bool weights);

/// Whether the file is a zip archive with a .pt2's program record (rather than TorchScript's).
bool is_pt2(const std::string& path);

}  // namespace placement::detail
