#pragma once
// A policy's tensors as a file: a zip (LibTorch's own writer and reader) of a JSON manifest naming
// each tensor's dtype, shape and record, and one record of raw bytes per tensor.
//
// Not LibTorch's pickled archive (torch::serialize): its reader gives a storage the byte count the
// pickle names, whatever the record holds, so a damaged or hostile file made the policy read past
// a parameter's buffer, and training would have written past it (tests/fuzz/policy_state_fuzzer
// found it). Here every tensor is read into a buffer this code sized from the tensor it must
// replace, and only once the record's size equals it.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>
#include <nlohmann/json.hpp>

namespace placement::plugins {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// The CRC-32 the archive keeps of its manifest and of each tensor's bytes.
uint32_t archive_crc32(const void* data, size_t size);

/// The archive of `tensors` (CPU, contiguous or not) and `extra` (small facts beside them).
std::string write_tensor_archive(const NamedTensors& tensors, const nlohmann::json& extra);

struct ReadArchive {
  /// Fresh CPU tensors, each with the dtype and shape of the tensor named alike in `expected`.
  std::map<std::string, torch::Tensor> tensors;
  nlohmann::json extra;
};

/// Reads an archive that holds exactly the tensors `names_for(extra)` returns, each of the dtype
/// and shape of the tensor given with it, and finite where it is of floating point. Throws
/// std::invalid_argument naming what does not fit. No tensor is allocated by a size the file names
/// (LibTorch's zip reader allocates its own version record by the size the zip names).
ReadArchive read_tensor_archive(
    const std::string& bytes,
    const std::function<std::map<std::string, torch::Tensor>(const nlohmann::json& extra)>&
        expected);

}  // namespace placement::plugins
