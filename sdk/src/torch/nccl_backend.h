#pragma once
// c10d's NCCL backend for one CUDA device of a replica group. Compiled only where the SDK is built
// against a CUDA LibTorch (PLACEMENT_CUDA_COPY_PATHS); elsewhere replica_group.cpp sends CUDA
// tensors through Gloo and host memory.

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace placement::detail {

/// The GPU behind CUDA device `index` as NCCL tells GPUs apart: this host (its name and boot id)
/// and the GPU's PCI address ("node7 (boot 3f2a9c1e)/0000:3b:00.0"). Two ranks with the same one
/// share a GPU, which NCCL refuses.
std::string gpu_identity(int index);

/// A ProcessGroupNCCL of the group's ranks on CUDA device `index`; its rendezvous keys live under
/// `prefix` in `store`, so each device's communicator is its own.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::string& prefix, int rank, int size,
                                                    int index, std::chrono::milliseconds timeout);

}  // namespace placement::detail
