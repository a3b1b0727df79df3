#include "nccl_backend.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace placement::detail {

std::string gpu_identity(int index) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "?");
  // NCCL's host hash adds the boot id: two machines may share a host name, never a boot.
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  char pci[32];
  std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
  return std::string(host) + (boot.empty() ? "" : " (boot " + boot.substr(0, 8) + ")") + "/" + pci;
}

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const std::string& prefix, int rank, int size,
                                                    int index, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  // The replica group waits for each collective with `timeout` and names a rank that never joined;
  // NCCL's watchdog, which would end the process with torch's own message, only well after that.
  options->timeout = 2 * timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
      c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, size, options);
  // A ProcessGroupNCCL serves one device of its process (PyTorch's rule since 2.2).
  group->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index)));
  return group;
}

}  // namespace placement::detail
