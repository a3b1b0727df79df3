#include "cuda_transfer.h"

#include <dlfcn.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace placement::detail {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
}

// NCCL, loaded on the first GPU-to-GPU migration: a job on one GPU, or on CPUs only, runs on a
// machine without libnccl, and the library does not tie every user of the SDK to it.
struct Nccl {
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
      throw std::runtime_error(std::string("moving tensors between GPUs needs NCCL: ") +
                               ::dlerror() +
                               " (install libnccl2, or put its directory on LD_LIBRARY_PATH)");
    Nccl n;
    auto bind = [lib](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (!fn) throw std::runtime_error(std::string("libnccl.so.2 has no ") + name);
    };
    bind(n.comm_init_all, "ncclCommInitAll");
    bind(n.group_start, "ncclGroupStart");
    bind(n.group_end, "ncclGroupEnd");
    bind(n.send, "ncclSend");
    bind(n.recv, "ncclRecv");
    bind(n.error_string, "ncclGetErrorString");
    return n;
  }();
  return loaded;
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string(what) + " failed: " + nccl().error_string(r));
}

// The calling thread's current device is LibTorch's business: put it back.
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() { cudaGetDevice(&device_); }
  ~CurrentDeviceGuard() { cudaSetDevice(device_); }

 private:
  int device_ = 0;
};

std::mutex& lock() {
  static std::mutex m;
  return m;
}

// One non-blocking stream per GPU for migrations, created on first use and kept (callers hold
// lock()).
cudaStream_t copy_stream(int device) {
  static std::map<int, cudaStream_t> streams;
  auto it = streams.find(device);
  if (it != streams.end()) return it->second;
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  streams[device] = s;
  return s;
}

// A single-process NCCL communicator over a set of GPUs (one rank per GPU), created on first use:
// ncclCommInitAll takes a good fraction of a second, a migration milliseconds.
struct Communicator {
  std::vector<int> devices;  // rank r is devices[r]
  std::vector<ncclComm_t> comms;
  int rank(int device) const {
    return static_cast<int>(std::lower_bound(devices.begin(), devices.end(), device) -
                            devices.begin());
  }
};

const Communicator& communicator(const std::set<int>& gpus) {
  static std::map<std::vector<int>, std::unique_ptr<Communicator>> cache;
  std::vector<int> key(gpus.begin(), gpus.end());
  auto& slot = cache[key];
  if (!slot) {
    auto c = std::make_unique<Communicator>();
    c->devices = key;
    c->comms.resize(key.size());
    check(nccl().comm_init_all(c->comms.data(), static_cast<int>(key.size()), key.data()),
          "ncclCommInitAll");
    slot = std::move(c);
  }
  return *slot;
}

bool is_pinned_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // pageable memory on old runtimes reports an error; clear it
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

// Two pinned chunks: the CPU fills one while the DMA engine drains the other, so a pageable
// source moves at the lower of memcpy and link bandwidth instead of their harmonic sum.
constexpr size_t kChunkBytes = size_t{32} << 20;

struct Staging {
  c10::DataPtr buffers[2];
  void* buffer[2] = {nullptr, nullptr};
  Staging() {
    // From the pool, under its budget: 64 MiB for the life of the process, once a job migrates.
    for (int i = 0; i < 2; ++i) {
      buffers[i] = host_pool().allocate(kChunkBytes);
      buffer[i] = buffers[i].get();
    }
  }
};

Staging& staging() {
  static Staging* s = new Staging();  // never destroyed: the pool outlives every block
  return *s;
}

void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  at::parallel_for(
      0, static_cast<int64_t>(bytes), int64_t{1} << 20, [&](int64_t begin, int64_t end) {
        std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                    static_cast<size_t>(end - begin));
      });
}

void staged_host_to_device(void* dst, const void* src, size_t bytes, int device,
                           cudaStream_t stream) {
  Staging& s = staging();
  cudaEvent_t drained[2];
  check(cudaSetDevice(device), "cudaSetDevice");
  for (cudaEvent_t& e : drained)
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  bool used[2] = {false, false};
  try {
    for (size_t offset = 0, k = 0; offset < bytes; offset += kChunkBytes, ++k) {
      const size_t b = k % 2, n = std::min(kChunkBytes, bytes - offset);
      if (used[b]) check(cudaEventSynchronize(drained[b]), "cudaEventSynchronize");
      parallel_memcpy(s.buffer[b], static_cast<const char*>(src) + offset, n);
      check(cudaMemcpyAsync(static_cast<char*>(dst) + offset, s.buffer[b], n,
                            cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (host to device)");
      check(cudaEventRecord(drained[b], stream), "cudaEventRecord");
      used[b] = true;
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the buffers are free again
  } catch (...) {
    cudaStreamSynchronize(stream);
    for (cudaEvent_t e : drained) cudaEventDestroy(e);
    throw;
  }
  for (cudaEvent_t e : drained) cudaEventDestroy(e);
}

}  // namespace

void cuda_copy(const std::vector<CopyRequest>& requests, const std::vector<size_t>& which,
               std::vector<at::Tensor>& out) {
  std::lock_guard<std::mutex> hold(lock());
  CurrentDeviceGuard restore;
  std::set<int> gpus, nccl_gpus;
  for (size_t i : which) {
    const CopyRequest& r = requests[i];
    if (r.source.is_cuda()) gpus.insert(r.source.device().index());
    if (r.target.is_cuda()) gpus.insert(r.target.index());
    if (r.source.is_cuda() && r.target.is_cuda()) {
      nccl_gpus.insert(r.source.device().index());
      nccl_gpus.insert(r.target.index());
    }
  }
  // What LibTorch queued on its own streams (the last step, the optimizer) must be done before
  // the copy streams read the sources.
  for (int d : gpus) {
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  for (int d : gpus) copy_stream(d);  // created before any NCCL group is open
  for (size_t i : which) {
    const CopyRequest& r = requests[i];
    // A tensor on the CPU that came from a GPU lives in pinned memory, so moving it back is one
    // DMA.
    out[i] = r.target.is_cuda() ? at::empty(r.source.sizes(), r.source.options().device(r.target))
                                : host_pool_empty(r.source.sizes(), r.source.scalar_type());
  }

  // GPU to GPU: every pair in one NCCL group, so sends and receives progress together.
  if (!nccl_gpus.empty()) {
    const Communicator& c = communicator(nccl_gpus);
    check(nccl().group_start(), "ncclGroupStart");
    ncclResult_t queued = ncclSuccess;
    for (size_t i : which) {
      const CopyRequest& r = requests[i];
      if (!r.source.is_cuda() || !r.target.is_cuda() || r.source.nbytes() == 0) continue;
      const int from = r.source.device().index(), to = r.target.index();
      const int from_rank = c.rank(from), to_rank = c.rank(to);
      if (queued == ncclSuccess)
        queued = nccl().send(r.source.data_ptr(), r.source.nbytes(), ncclUint8, to_rank,
                             c.comms[from_rank], copy_stream(from));
      if (queued == ncclSuccess)
        queued = nccl().recv(out[i].data_ptr(), r.source.nbytes(), ncclUint8, from_rank,
                             c.comms[to_rank], copy_stream(to));
    }
    check(nccl().group_end(), "ncclGroupEnd");
    check(queued, "ncclSend/ncclRecv");
  }
  // GPU to CPU straight into pinned memory; CPU to GPU in one DMA from pinned memory, staged
  // otherwise.
  for (size_t i : which) {
    const CopyRequest& r = requests[i];
    const size_t bytes = r.source.nbytes();
    if (bytes == 0 || (r.source.is_cuda() && r.target.is_cuda())) continue;
    if (r.source.is_cuda()) {
      const int d = r.source.device().index();
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaMemcpyAsync(out[i].data_ptr(), r.source.data_ptr(), bytes, cudaMemcpyDeviceToHost,
                            copy_stream(d)),
            "cudaMemcpyAsync (device to host)");
    } else if (is_pinned_host(r.source.data_ptr())) {
      const int d = r.target.index();
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaMemcpyAsync(out[i].data_ptr(), r.source.data_ptr(), bytes, cudaMemcpyHostToDevice,
                            copy_stream(d)),
            "cudaMemcpyAsync (host to device)");
    } else {
      staged_host_to_device(out[i].data_ptr(), r.source.data_ptr(), bytes, r.target.index(),
                            copy_stream(r.target.index()));
    }
  }
  for (int d : gpus) {
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaStreamSynchronize(copy_stream(d)), "cudaStreamSynchronize");
  }
}

std::unique_ptr<SlabSource> cuda_slab_source() {
  class CudaSlabs final : public SlabSource {
   public:
    void* allocate(size_t bytes) override {
      void* p = nullptr;
      check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc (pinned pool)");
      return p;
    }
    void release(void* slab, size_t) noexcept override { cudaFreeHost(slab); }
  };
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    cudaGetLastError();  // no driver or no GPU: nothing to page-lock for
    return nullptr;
  }
  return std::make_unique<CudaSlabs>();
}

uint64_t cuda_total_memory(int device) {
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return static_cast<uint64_t>(properties.totalGlobalMem);
}

}  // namespace placement::detail
