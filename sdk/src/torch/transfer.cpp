#include "transfer.h"

#include "cuda_transfer.h"
#include "pinned_pool.h"

namespace placement::detail {

CopyPath copy_path(c10::Device from, c10::Device to) {
  if (from == to) return CopyPath::kClone;
  if (!has_cuda_copy_paths() || (!from.is_cuda() && !to.is_cuda())) return CopyPath::kTensorTo;
  if (from.is_cuda() && to.is_cuda()) return CopyPath::kNccl;
  return from.is_cuda() ? CopyPath::kDeviceToHost : CopyPath::kHostToDevice;
}

bool has_cuda_copy_paths() {
#ifdef PLACEMENT_CUDA_COPY_PATHS
  return true;
#else
  return false;
#endif
}

std::optional<uint64_t> cuda_memory_bytes([[maybe_unused]] int device) {
#ifdef PLACEMENT_CUDA_COPY_PATHS
  return cuda_total_memory(device);
#else
  return std::nullopt;
#endif
}

std::vector<at::Tensor> copy_all(const std::vector<CopyRequest>& requests) {
  std::vector<at::Tensor> out(requests.size());
  std::vector<size_t> cuda;
  for (size_t i = 0; i < requests.size(); ++i) {
    const CopyRequest& r = requests[i];
    // The CUDA path puts its host targets in the pool itself; any other copy there goes here.
    if (r.pinned && r.target.is_cpu() &&
        !(r.source.is_cuda() && r.source.is_contiguous() && has_cuda_copy_paths())) {
      out[i] = host_pool_copy(r.source);
      continue;
    }
    switch (copy_path(r.source.device(), r.target)) {
      case CopyPath::kClone:
        out[i] = r.source.clone();
        break;
      case CopyPath::kTensorTo:
        out[i] = r.source.to(r.target);
        break;
      default:
        // The CUDA paths copy raw bytes: a strided view goes the generic way.
        if (r.source.is_contiguous())
          cuda.push_back(i);
        else
          out[i] = r.source.to(r.target);
    }
  }
#ifdef PLACEMENT_CUDA_COPY_PATHS
  if (!cuda.empty()) cuda_copy(requests, cuda, out);
#endif
  return out;
}

}  // namespace placement::detail
