#include "pinned_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include <ATen/EmptyTensor.h>
#include <c10/util/Exception.h>

#include "cuda_transfer.h"

namespace placement::detail {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (1 << 19)) >> 20) + " MiB";  // to the nearest MiB
}

// Ordinary host memory, where no GPU can take page-locked memory (no copy to a GPU asks the pool
// there).
class HostSlabSource final : public SlabSource {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(4096, round_up(bytes, 4096));
    if (!p) throw std::runtime_error("aligned_alloc of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  void release(void* slab, size_t) noexcept override { std::free(slab); }
};

// Asks the CUDA runtime only when the first slab is needed: a job that never copies to a GPU
// never initialises CUDA (which would cost it time, and its forked workers their own CUDA).
class FirstUseSlabSource final : public SlabSource {
 public:
  void* allocate(size_t bytes) override {
    if (!inner_) {
#ifdef PLACEMENT_CUDA_COPY_PATHS
      inner_ = cuda_slab_source();
#endif
      if (!inner_) inner_ = std::make_unique<HostSlabSource>();
    }
    return inner_->allocate(bytes);
  }
  void release(void* slab, size_t bytes) noexcept override { inner_->release(slab, bytes); }

 private:
  std::unique_ptr<SlabSource> inner_;  // the pool's mutex is held around both calls
};

}  // namespace

// A live block: where it is, so that freeing it finds its slab.
struct PinnedPool::Block {
  PinnedPool* pool = nullptr;
  Slab* slab = nullptr;
  size_t offset = 0;
  size_t bytes = 0;
};

PinnedPool::PinnedPool(uint64_t limit_bytes, std::unique_ptr<SlabSource> source)
    : source_(std::move(source)) {
  stats_.limit_bytes = limit_bytes;
}

PinnedPool::~PinnedPool() {
  // Only pools whose blocks are all freed are destroyed (tests); the process's lives forever.
  for (const auto& slab : slabs_) source_->release(slab->base, slab->bytes);
}

void* PinnedPool::carve(Slab& slab, size_t bytes) {
  for (auto it = slab.free.begin(); it != slab.free.end(); ++it) {
    if (it->second < bytes) continue;
    const size_t offset = it->first, left = it->second - bytes;
    slab.free.erase(it);
    if (left > 0) slab.free.emplace(offset + bytes, left);
    slab.used += bytes;
    return slab.base + offset;
  }
  return nullptr;
}

c10::DataPtr PinnedPool::allocate(size_t n) {
  if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
  const size_t bytes = round_up(n, kGranularity);
  std::unique_lock<std::mutex> lock(mutex_);
  void* at = nullptr;
  Slab* in = nullptr;
  for (const auto& slab : slabs_)
    if ((at = carve(*slab, bytes))) {
      in = slab.get();
      break;
    }
  if (!at) {
    // A new slab: the usual size where the budget leaves room for it, else just this block.
    const uint64_t room =
        stats_.limit_bytes > stats_.reserved_bytes ? stats_.limit_bytes - stats_.reserved_bytes : 0;
    if (bytes > room) trim_locked();
    const uint64_t room_now =
        stats_.limit_bytes > stats_.reserved_bytes ? stats_.limit_bytes - stats_.reserved_bytes : 0;
    if (bytes > room_now) {
      ++stats_.refusals;
      const PinnedPoolStats s = stats_;
      lock.unlock();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "out of pinned host memory: ", n,
                       " bytes asked for with ", s.in_use_bytes, " bytes in use and ",
                       s.reserved_bytes, " held by the pool, whose budget is ", s.limit_bytes,
                       " bytes (", mib(s.limit_bytes),
                       "; placementd's [memory] host_pinned_bytes, or the job's own "
                       "host_pinned_bytes option, sets it)");
    }
    const size_t slab_bytes =
        static_cast<size_t>(std::max<uint64_t>(bytes, std::min<uint64_t>(kSlabBytes, room_now)));
    auto slab = std::make_unique<Slab>();
    slab->base = static_cast<char*>(source_->allocate(slab_bytes));
    slab->bytes = slab_bytes;
    slab->free.emplace(0, slab_bytes);
    stats_.reserved_bytes += slab_bytes;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    ++stats_.slabs_taken;
    at = carve(*slab, bytes);
    in = slab.get();
    slabs_.push_back(std::move(slab));
  }
  stats_.in_use_bytes += bytes;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  auto* block = new Block{this, in, static_cast<size_t>(static_cast<char*>(at) - in->base), bytes};
  return c10::DataPtr(at, block, &PinnedPool::free_block, c10::Device(c10::kCPU));
}

bool PinnedPool::owns(const c10::DataPtr& data) const {
  return data.get_deleter() == &PinnedPool::free_block &&
         static_cast<const Block*>(data.get_context())->pool == this;
}

void PinnedPool::free_block(void* context) {
  auto* block = static_cast<Block*>(context);
  block->pool->release(block);
}

void PinnedPool::release(Block* block) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    Slab& slab = *block->slab;
    auto [it, inserted] = slab.free.emplace(block->offset, block->bytes);
    // Merged with the free range after it, then with the one before it.
    if (auto next = std::next(it);
        next != slab.free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      slab.free.erase(next);
    }
    if (it != slab.free.begin()) {
      auto previous = std::prev(it);
      if (previous->first + previous->second == it->first) {
        previous->second += it->second;
        slab.free.erase(it);
      }
    }
    slab.used -= block->bytes;
    stats_.in_use_bytes -= block->bytes;
    // Over the budget (it was lowered): what is wholly free goes back at once.
    if (stats_.reserved_bytes > stats_.limit_bytes && slab.used == 0) trim_locked();
  }
  delete block;
}

void PinnedPool::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

void PinnedPool::trim_locked() {
  auto idle = [](const std::unique_ptr<Slab>& s) { return s->used == 0; };
  for (const auto& slab : slabs_)
    if (idle(slab)) {
      source_->release(slab->base, slab->bytes);
      stats_.reserved_bytes -= slab->bytes;
    }
  slabs_.erase(std::remove_if(slabs_.begin(), slabs_.end(), idle), slabs_.end());
}

void PinnedPool::trim() {
  const std::lock_guard<std::mutex> lock(mutex_);
  trim_locked();
}

void PinnedPool::set_limit(uint64_t bytes) {
  const std::lock_guard<std::mutex> lock(mutex_);
  stats_.limit_bytes = bytes;
  if (stats_.reserved_bytes > bytes) trim_locked();
}

PinnedPoolStats PinnedPool::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

uint64_t default_host_pinned_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 30;  // unknown: 1 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

PinnedPool& host_pool() {
  static PinnedPool* pool = [] {
    return new PinnedPool(default_host_pinned_bytes(), std::make_unique<FirstUseSlabSource>());
  }();
  return *pool;
}

at::Tensor host_pool_empty(at::IntArrayRef sizes, at::ScalarType type) {
  return at::Tensor(at::detail::empty_generic(sizes, &host_pool(),
                                              c10::DispatchKeySet(c10::DispatchKey::CPU), type,
                                              c10::MemoryFormat::Contiguous));
}

at::Tensor host_pool_empty_like(const at::Tensor& t) {
  const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
  return t.is_non_overlapping_and_dense()
             ? at::detail::empty_strided_generic(t.sizes(), t.strides(), &host_pool(), cpu,
                                                 t.scalar_type())
             : at::detail::empty_generic(t.sizes(), &host_pool(), cpu, t.scalar_type(),
                                         c10::MemoryFormat::Contiguous);
}

at::Tensor host_pool_copy(const at::Tensor& t) {
  at::Tensor out = host_pool_empty_like(t);
  out.copy_(t);
  return out;
}

bool in_host_pool(const at::Tensor& t) {
  return t.defined() && t.has_storage() && host_pool().owns(t.storage().data_ptr());
}

}  // namespace placement::detail
