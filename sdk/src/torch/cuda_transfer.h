#pragma once
// The CUDA and NCCL half of transfer.h, compiled only where the CUDA toolkit and NCCL were found
// (PLACEMENT_CUDA_COPY_PATHS). Uses the CUDA runtime and NCCL directly on the tensors' memory,
// so it needs no CUDA build of LibTorch's headers; LibTorch allocates the destinations.

#include <cstdint>
#include <memory>
#include <vector>

#include "pinned_pool.h"
#include "transfer.h"

namespace placement::detail {

#ifdef PLACEMENT_CUDA_COPY_PATHS
/// Copies requests[i] for every i in `which` (contiguous sources, at least one end a GPU) into
/// out[i]. GPU to GPU goes through NCCL even when both ends are the same GPU (a send to itself:
/// copy_all clones those instead, but a one-GPU machine can check the NCCL path that way). On
/// return every copy is complete; on a throw `out` is left partly filled and the caller discards
/// it.
void cuda_copy(const std::vector<CopyRequest>& requests, const std::vector<size_t>& which,
               std::vector<at::Tensor>& out);
/// The GPU's memory in bytes; throws std::runtime_error naming the CUDA call that failed.
uint64_t cuda_total_memory(int device);
/// Slabs of page-locked memory from the CUDA runtime (cudaHostAlloc, portable to every GPU's
/// context), for host_pool(); nullptr where the runtime sees no GPU.
std::unique_ptr<SlabSource> cuda_slab_source();
#endif

}  // namespace placement::detail
