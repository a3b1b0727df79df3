#pragma once
// Batched tensor copies between physical devices, for the hot-swap (issue #5): GPU↔GPU with NCCL
// (one single-process communicator over the GPUs involved, grouped send/receive), CPU↔GPU through
// pinned host memory (pageable sources staged in chunks, GPU→CPU straight into pinned memory), and
// everything else by Tensor::to. Private to libplacement_torch.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace placement::detail {

struct CopyRequest {
  at::Tensor source;
  c10::Device target;
  /// A host target in the pinned pool (pinned_pool.h): memory a GPU reads at every step.
  bool pinned = false;
};

/// How a copy is done.
enum class CopyPath {
  kClone,         // already on the target device: a copy of its own (logical devices of one)
  kTensorTo,      // CPU↔CPU, or a CUDA copy in a build without the CUDA path
  kHostToDevice,  // pinned source: one DMA; pageable: staged through pinned chunks
  kDeviceToHost,  // into pinned host memory
  kNccl,          // GPU → another GPU
};

/// The path copy_all takes from `from` to `to` in this build.
CopyPath copy_path(c10::Device from, c10::Device to);

/// Whether this build has the CUDA and NCCL copy paths (CUDA toolkit and NCCL found at build time).
bool has_cuda_copy_paths();

/// The memory of GPU `device` in bytes, read from the device; nullopt in a build without the CUDA
/// paths. Throws std::runtime_error when the CUDA runtime cannot answer (no such device, no
/// driver).
std::optional<uint64_t> cuda_memory_bytes(int device);

/// A copy of every request's source on its target, values bitwise equal, all complete (devices
/// synchronised) when it returns. Throws std::runtime_error naming the failing CUDA or NCCL call
/// (out of memory included); the sources are never modified, so a caller can keep using them.
std::vector<at::Tensor> copy_all(const std::vector<CopyRequest>& requests);

}  // namespace placement::detail
