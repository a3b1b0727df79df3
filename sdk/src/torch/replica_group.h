#pragma once
// A data-parallel replica group on torch.distributed's c10d: a TCPStore rendezvous and a Gloo
// process group, and the few collectives placement::Job needs from it.

#include <chrono>
#include <cstdint>
#include <functional>
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
};

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
  /// Rank 0's `bytes` on every rank.
  std::string broadcast(const std::string& bytes);
  /// Every rank's `tensors` overwritten in place with rank 0's.
  void broadcast(const std::vector<at::Tensor>& tensors);
  /// Each gradient of `parameters` replaced by its mean over the ranks (a parameter without one
  /// here counts as zeros; every rank passes the same parameters).
  void average_gradients(const std::vector<at::Tensor>& parameters);

 private:
  // Runs a collective; its failure becomes an error that says which ranks are gone.
  void run(const char* what, const std::function<void()>& collective);
  std::string missing_ranks();

  ReplicaConfig config_;
  std::string name_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> group_;
};

}  // namespace placement::detail
