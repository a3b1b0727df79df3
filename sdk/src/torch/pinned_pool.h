#pragma once
// The host memory that copies between the host and a GPU go through: page-locked, so that a copy
// is one DMA the GPU runs by itself, and held under a budget (`[memory] host_pinned_bytes`), so
// that a job that streams its parameters or offloads its activations cannot lock so much of the
// machine's memory that the kernel's OOM killer ends it or its neighbours. LibTorch's own pinned
// allocator asks the CUDA runtime for each block (cudaHostAlloc can take milliseconds and
// serialises the GPU), rounds every block up to a power of two and keeps what it freed for the
// process's life, with no bound. This pool takes slabs of 64 MiB (or one request's size) and
// carves blocks out of them, first fit at 256-byte granularity, merging neighbours when they are
// freed. Private to libplacement_torch.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

namespace placement::detail {

/// Where a pool's slabs come from: the CUDA runtime's page-locked memory, or (in tests) anything.
class SlabSource {
 public:
  virtual ~SlabSource() = default;
  /// `bytes` of memory, aligned to at least 256 bytes. Throws std::runtime_error naming the call
  /// that failed.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* slab, size_t bytes) noexcept = 0;
};

struct PinnedPoolStats {
  /// The budget: slabs are never taken past it.
  uint64_t limit_bytes = 0;
  /// Slabs held (what is locked), and the most ever held at once.
  uint64_t reserved_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  /// Bytes of live blocks (each rounded up to 256), and their peak.
  uint64_t in_use_bytes = 0;
  uint64_t peak_in_use_bytes = 0;
  /// Slabs taken from the source, and allocations refused at the budget.
  uint64_t slabs_taken = 0;
  uint64_t refusals = 0;
};

/// A LibTorch allocator over slabs. Thread-safe: a block may be freed on any thread (autograd's).
/// It must outlive every tensor made from it (the process's pool is never destroyed).
class PinnedPool final : public c10::Allocator {
 public:
  static constexpr size_t kGranularity = 256;
  static constexpr size_t kSlabBytes = size_t{64} << 20;

  PinnedPool(uint64_t limit_bytes, std::unique_ptr<SlabSource> source);
  ~PinnedPool() override;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  /// A block of `n` bytes. Throws c10::OutOfMemoryError, naming the budget and
  /// `[memory] host_pinned_bytes`, when no free block holds it and a new slab would take the pool
  /// past its budget; std::runtime_error when the source fails.
  c10::DataPtr allocate(size_t n) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  /// A new budget. Below what the slabs hold, the wholly free slabs are given back first; what is
  /// still held stays, and no slab is taken until the pool is under the budget again.
  void set_limit(uint64_t bytes);
  /// Gives every wholly free slab back to its source.
  void trim();
  PinnedPoolStats stats() const;
  /// Whether `data` is one of this pool's blocks.
  bool owns(const c10::DataPtr& data) const;

 private:
  struct Slab {
    char* base = nullptr;
    size_t bytes = 0;
    std::map<size_t, size_t> free;  // offset → length, neighbours merged
    size_t used = 0;
  };
  struct Block;
  static void free_block(void* context);
  void release(Block* block);
  // Callers hold mutex_.
  void* carve(Slab& slab, size_t bytes);
  void trim_locked();

  mutable std::mutex mutex_;
  std::unique_ptr<SlabSource> source_;
  std::vector<std::unique_ptr<Slab>> slabs_;
  PinnedPoolStats stats_;
};

/// The process's pool for memory the host shares with its GPUs: page-locked through the CUDA
/// runtime in a build with the CUDA paths (transfer.h) on a machine with a GPU, ordinary host
/// memory elsewhere (where no copy to a GPU asks for it). Its budget starts at
/// default_host_pinned_bytes(); a job sets what placementd and its options say (Job, at attach).
/// Created on first use, never destroyed: blocks may be freed at the process's exit, after static
/// destructors ran.
PinnedPool& host_pool();

/// A quarter of the machine's physical memory: what the pool may lock unless told otherwise.
uint64_t default_host_pinned_bytes();

/// An uninitialised contiguous host tensor in host_pool()'s memory. Throws as
/// PinnedPool::allocate does.
at::Tensor host_pool_empty(at::IntArrayRef sizes, at::ScalarType type);

/// A copy of `t` (any device) on the host in host_pool()'s memory, with t's sizes and strides
/// where t is dense, bitwise equal. Throws as PinnedPool::allocate does.
at::Tensor host_pool_copy(const at::Tensor& t);
/// An uninitialised host tensor in the pool with `t`'s sizes, strides where `t` is dense (else
/// contiguous) and type: where a copy from a GPU that runs aside lands (copy_lane.h).
at::Tensor host_pool_empty_like(const at::Tensor& t);

/// Whether `t`'s memory is a block of host_pool().
bool in_host_pool(const at::Tensor& t);

}  // namespace placement::detail
