#pragma once
// A data-parallel replica group on torch.distributed's c10d: a TCPStore rendezvous, a Gloo process
// group for host memory and one NCCL process group per CUDA device, and the few collectives
// placement::Job needs from them.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "placement/job.h"

namespace placement::detail {

struct ReplicaConfig {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::chrono::milliseconds timeout{60000};
  uint64_t bucket_bytes = 25ull << 20;
  CudaCollectives cuda_collectives = CudaCollectives::kAuto;
};

/// Whether this build of the SDK has c10d's NCCL backend.
bool nccl_built();

/// How a CUDA device's tensors cross between the ranks.
struct CudaRoute {
  bool nccl = false;
  /// What JobStats::collectives shows: "nccl", or "gloo ..." and why not NCCL.
  std::string description;
};

/// The route for `device` ("cuda:0") when `gpu_of_rank[r]` is the GPU (gpu_identity) behind it on
/// rank r: NCCL needs a GPU of its own on every rank. Throws std::runtime_error, naming the ranks
/// and the GPU, when `mode` is kNccl and NCCL cannot carry it.
CudaRoute route_cuda_device(CudaCollectives mode, bool nccl_built, const std::string& device,
                            const std::vector<std::string>& gpu_of_rank);

/// `options` completed from torchrun's environment as it says; nullopt for a single process.
/// Throws std::invalid_argument naming the field or variable at fault.
std::optional<ReplicaConfig> replica_config(const ReplicaOptions& options);

class ReplicaGroup {
 public:
  /// Joins the group (rank 0 serves the store); throws std::runtime_error when the other ranks do
  /// not come within the timeout.
  explicit ReplicaGroup(const ReplicaConfig& config);
  ~ReplicaGroup();

  int rank() const { return config_.rank; }
  int size() const { return config_.world_size; }
  /// The same on every rank of this run of the group and on no other run: the rendezvous address
  /// and a number rank 0 drew ("10.0.0.1:29500/3fa2c1d0"). Daemons show it with each rank's job.
  const std::string& name() const { return name_; }

  /// The element-wise maximum of `values` over the ranks (every rank passes as many).
  std::vector<double> max(const std::vector<double>& values);
  /// Whether every rank passed the same `values` (as many on every rank); every rank gets the
  /// same answer.
  bool same_on_every_rank(const std::vector<double>& values);
  /// Rank 0's `bytes` on every rank.
  std::string broadcast(const std::string& bytes);
  /// Every rank's `tensors` overwritten in place with rank 0's. `slots[i]` is the job's device
  /// (an index into its devices, the same on every rank) that tensors[i] lives on, -1 for none.
  void broadcast(const std::vector<at::Tensor>& tensors, const std::vector<int>& slots);
  /// Each gradient of `parameters` replaced by its mean over the ranks (a parameter without one
  /// here counts as zeros; every rank passes the same parameters), on the device that holds it;
  /// `slots` as for broadcast.
  void average_gradients(const std::vector<at::Tensor>& parameters, const std::vector<int>& slots);
  /// Per device used so far ("cpu", "cuda:0"), what carries its tensors.
  std::map<std::string, std::string> routes() const;

 private:
  struct Route {
    c10::intrusive_ptr<c10d::Backend> nccl;  // null: Gloo (through host memory for a CUDA device)
    std::string device;                      // this rank's device behind the slot
    std::string description;
  };
  // What pairs a tensor with the other ranks' copies: the job's device index for a GPU (ranks pair
  // by position, not by name: rank 1's cuda:4 may stand where rank 0's cuda:0 does), one key for
  // host memory (every logical CPU device), one for a GPU tensor on no device of the job.
  static constexpr int kHostMemory = -1;
  static constexpr int kUnplacedCuda = -2;
  static int pairing(int slot, const at::Device& device);
  // The route of the tensors paired by pairing(slot, device), agreed with the other ranks on its
  // first use. Everything but a job GPU goes through Gloo and host memory.
  const Route& route(int slot, const at::Device& device);
  // Waits for a collective issued on `via`, within the group's timeout.
  void complete(const Route& via, const c10::intrusive_ptr<c10d::Work>& work);
  // Runs a collective; its failure becomes an error that says which ranks are gone.
  void run(const std::string& what, const std::function<void()>& collective);
  std::string missing_ranks();
  // Gives up every NCCL communicator: a kernel waiting for a dead rank would hold the GPU forever.
  void abort_nccl();

  ReplicaConfig config_;
  std::string name_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> group_;
  std::map<int, Route> routes_;
  bool aborted_ = false;
};

}  // namespace placement::detail
