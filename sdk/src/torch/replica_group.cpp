#include "replica_group.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

// Gloo's headers come from Debian's libgloo-dev; c10d keeps every gloo object behind a pointer, so
// ProcessGroupGloo's layout does not depend on which gloo version they are.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef PLACEMENT_CUDA_COPY_PATHS
#include "nccl_backend.h"
#endif

namespace placement::detail {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, const std::string& text) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size())
    throw std::invalid_argument(std::string(name) + "=" + text + " is not an integer");
  return value;
}

}  // namespace

bool nccl_built() {
#ifdef PLACEMENT_CUDA_COPY_PATHS
  return true;
#else
  return false;
#endif
}

CudaRoute route_cuda_device(CudaCollectives mode, bool built, const std::string& device,
                            const std::vector<std::string>& gpu_of_rank) {
  const std::string gloo = "gloo through host memory: ";
  if (mode == CudaCollectives::kGloo) return {false, gloo + "cuda_collectives is gloo"};
  std::string refused;
  if (!built) {
    refused = "this build of the SDK has no NCCL (LibTorch without CUDA)";
  } else {
    std::map<std::string, int> first_rank_on;
    for (int r = 0; r < static_cast<int>(gpu_of_rank.size()) && refused.empty(); ++r) {
      const auto [at, fresh] = first_rank_on.emplace(gpu_of_rank[r], r);
      if (!fresh)
        refused = "ranks " + std::to_string(at->second) + " and " + std::to_string(r) +
                  " both run " + device + " on the GPU " + gpu_of_rank[r] + ", which NCCL refuses";
    }
  }
  if (refused.empty()) return {true, "nccl"};
  if (mode == CudaCollectives::kNccl)
    throw std::runtime_error(
        "replica group: cuda_collectives is nccl, but " + refused +
        (built ? "; give every rank a GPU of its own (e.g. devices from LOCAL_RANK, or "
                 "CUDA_VISIBLE_DEVICES), or set cuda_collectives to auto or gloo"
               : "; set cuda_collectives to auto or gloo"));
  return {false, gloo + refused};
}

std::optional<ReplicaConfig> replica_config(const ReplicaOptions& o) {
  ReplicaConfig c;
  c.rank = o.rank;
  c.world_size = o.world_size;
  c.master_addr = o.master_addr;
  c.master_port = o.master_port;
  if (o.from_environment) {
    if (c.world_size == 0)
      if (auto v = env("WORLD_SIZE")) c.world_size = env_int("WORLD_SIZE", *v);
    if (c.rank < 0)
      if (auto v = env("RANK")) c.rank = env_int("RANK", *v);
    if (c.master_addr.empty())
      if (auto v = env("MASTER_ADDR")) c.master_addr = *v;
    if (c.master_port == 0)
      if (auto v = env("MASTER_PORT")) c.master_port = env_int("MASTER_PORT", *v);
  }
  if (c.world_size < 0)
    throw std::invalid_argument("replicas: world_size (WORLD_SIZE) " +
                                std::to_string(c.world_size) + " is negative");
  if (c.world_size <= 1) return std::nullopt;
  const std::string where =
      o.from_environment ? " (torchrun's environment, or JobOptions::replicas)" : "";
  if (c.rank < 0 || c.rank >= c.world_size)
    throw std::invalid_argument("replicas: rank (RANK) " + std::to_string(c.rank) +
                                " is not in [0, " + std::to_string(c.world_size) + ")" + where);
  if (c.master_addr.empty())
    throw std::invalid_argument("replicas: no master_addr (MASTER_ADDR)" + where);
  if (c.master_port <= 0 || c.master_port > 65535)
    throw std::invalid_argument("replicas: master_port (MASTER_PORT) " +
                                std::to_string(c.master_port) + " is not a TCP port" + where);
  if (o.timeout_ms <= 0) throw std::invalid_argument("replicas: timeout_ms must be > 0");
  if (o.bucket_bytes == 0) throw std::invalid_argument("replicas: bucket_bytes must be > 0");
  if (o.cuda_collectives == CudaCollectives::kNccl && !nccl_built())
    throw std::invalid_argument(
        "replicas: cuda_collectives is nccl, but this build of the SDK has no NCCL (LibTorch "
        "without CUDA); set it to auto or gloo");
  c.timeout = std::chrono::milliseconds(o.timeout_ms);
  c.bucket_bytes = o.bucket_bytes;
  c.cuda_collectives = o.cuda_collectives;
  return c;
}

ReplicaGroup::ReplicaGroup(const ReplicaConfig& config) : config_(config) {
  const std::string who =
      "rank " + std::to_string(config_.rank) + " of " + std::to_string(config_.world_size);
  // A write to a peer that has died raises SIGPIPE where the socket code does not pass
  // MSG_NOSIGNAL (c10d's Gloo and store sockets): by default that ends this rank at once, silently,
  // where it should end with an error that names the dead rank. Python ignores SIGPIPE already; a
  // C++ job that left it at its default gets the same. A job's own handler is left alone.
  struct sigaction pipe {};
  if (::sigaction(SIGPIPE, nullptr, &pipe) == 0 && pipe.sa_handler == SIG_DFL)
    ::signal(SIGPIPE, SIG_IGN);
  try {
    c10d::TCPStoreOptions store;
    store.port = static_cast<uint16_t>(config_.master_port);
    store.isServer = config_.rank == 0;
    store.numWorkers = static_cast<size_t>(config_.world_size);
    store.timeout = config_.timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(config_.master_addr, store);
    auto options = c10d::ProcessGroupGloo::Options::create(config_.timeout);
    // The interface that reaches the master is the one the other ranks reach this one on.
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(config_.master_addr));
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, config_.rank, config_.world_size,
                                                         options);
    const std::string key = "placementd/group";
    if (config_.rank == 0) {
      char nonce[9];
      std::snprintf(nonce, sizeof(nonce), "%08x", static_cast<unsigned>(std::random_device{}()));
      const std::string name =
          config_.master_addr + ":" + std::to_string(config_.master_port) + "/" + nonce;
      store_->set(key, std::vector<uint8_t>(name.begin(), name.end()));
    }
    const std::vector<uint8_t> name = store_->get(key);
    name_.assign(name.begin(), name.end());
  } catch (const std::exception& e) {
    throw std::runtime_error("replica group: " + who + " could not join at " + config_.master_addr +
                             ":" + std::to_string(config_.master_port) + " within " +
                             std::to_string(config_.timeout.count()) + " ms: " + e.what());
  }
}

ReplicaGroup::~ReplicaGroup() {
  if (aborted_) return;
  for (auto& [slot, route] : routes_)
    if (route.nccl) try {
        route.nccl->shutdown();
      } catch (const std::exception&) {
        // The process is leaving the group either way; the communicator's resources go with it.
      }
}

void ReplicaGroup::abort_nccl() {
  aborted_ = true;
  for (auto& [slot, route] : routes_)
    if (route.nccl) try {
        route.nccl->abort();
      } catch (const std::exception&) {
        // Already broken: nothing more to release.
      }
}

void ReplicaGroup::run(const std::string& what, const std::function<void()>& collective) {
  if (aborted_)
    throw std::runtime_error("replica group: " + what + " on rank " + std::to_string(config_.rank) +
                             ": the group failed earlier and is closed");
  try {
    collective();
  } catch (const std::exception& e) {
    abort_nccl();
    throw std::runtime_error(
        "replica group: " + what + " failed on rank " + std::to_string(config_.rank) + " of " +
        std::to_string(config_.world_size) + ": " + missing_ranks() + " (" + e.what() + ")");
  }
}

int ReplicaGroup::pairing(int slot, const at::Device& device) {
  if (!device.is_cuda()) return kHostMemory;
  return slot >= 0 ? slot : kUnplacedCuda;
}

const ReplicaGroup::Route& ReplicaGroup::route(int slot, const at::Device& device) {
  slot = pairing(slot, device);
  if (auto it = routes_.find(slot); it != routes_.end()) return it->second;
  const std::string name = device.str();
  Route route{nullptr, name, "gloo"};
  if (slot == kUnplacedCuda)
    route.description = "gloo through host memory: on no device of the job";
  if (slot >= 0) {
    std::vector<std::string> gpu_of_rank;
#ifdef PLACEMENT_CUDA_COPY_PATHS
    if (config_.cuda_collectives != CudaCollectives::kGloo) {
      // Each rank names the GPU behind its device; NCCL cannot have two ranks on one.
      const std::string key = "placementd/gpu/" + std::to_string(slot) + "/";
      run("naming the GPU behind " + name, [&] {
        const std::string mine = gpu_identity(device.index());
        store_->set(key + std::to_string(config_.rank),
                    std::vector<uint8_t>(mine.begin(), mine.end()));
        for (int r = 0; r < config_.world_size; ++r) {
          const std::vector<uint8_t> id = store_->get(key + std::to_string(r));
          gpu_of_rank.emplace_back(id.begin(), id.end());
        }
        // Every rank has read every name before any decides: a rank refused NCCL ends, and rank 0
        // ending takes the store down under a rank still reading.
        std::vector<at::Tensor> barrier = {at::zeros({1})};
        group_->allreduce(barrier)->wait();
      });
    }
#endif
    const CudaRoute chosen =
        route_cuda_device(config_.cuda_collectives, nccl_built(), name, gpu_of_rank);
    route.description = chosen.description;
#ifdef PLACEMENT_CUDA_COPY_PATHS
    if (chosen.nccl)
      run("starting NCCL on " + name, [&] {
        route.nccl =
            make_nccl_backend(store_, "placementd/nccl/" + std::to_string(slot) + "/", config_.rank,
                              config_.world_size, device.index(), config_.timeout);
      });
#endif
  }
  return routes_.emplace(slot, std::move(route)).first->second;
}

void ReplicaGroup::complete(const Route& via, const c10::intrusive_ptr<c10d::Work>& work) {
  // NCCL's plain wait() only orders the current stream after the collective: a rank that died
  // would leave the step's closing device sync hanging. Waiting with the timeout fails here
  // instead, where the roll call can name the rank; Job::step syncs its devices at the end of every
  // step anyway, so the host gives up no overlap.
  if (via.nccl)
    work->wait(config_.timeout);
  else
    work->wait();
}

std::map<std::string, std::string> ReplicaGroup::routes() const {
  std::map<std::string, std::string> out;
  for (const auto& [slot, route] : routes_) out[route.device] = route.description;
  return out;
}

std::string ReplicaGroup::missing_ranks() {
  // Gloo names a peer by its address only. A roll call in the store names the ranks: each rank
  // whose collective failed answers, and whoever has not within a few seconds ended or hangs.
  const auto key = [](int rank) { return "placementd/roll-call/" + std::to_string(rank); };
  std::vector<int> missing;
  try {
    store_->set(key(config_.rank), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() +
                          std::min(config_.timeout, std::chrono::milliseconds(5000));
    do {
      missing.clear();
      for (int r = 0; r < config_.world_size; ++r)
        if (!store_->check({key(r)})) missing.push_back(r);
      if (missing.empty() || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (true);
  } catch (const std::exception&) {
    return "rank 0, which serves the group's store at " + config_.master_addr + ":" +
           std::to_string(config_.master_port) + ", is gone";
  }
  if (missing.empty())
    return "every rank is still there (a rank failed its part, see its own error)";
  std::string ranks;
  for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return (missing.size() == 1 ? "rank " : "ranks ") + ranks + " ended or did not answer within " +
         std::to_string(config_.timeout.count()) + " ms";
}

std::vector<double> ReplicaGroup::max(const std::vector<double>& values) {
  at::Tensor t = at::tensor(values, at::kDouble);
  run("the step's exchange", [&] {
    std::vector<at::Tensor> ts = {t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    group_->allreduce(ts, o)->wait();
  });
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool ReplicaGroup::same_on_every_rank(const std::vector<double>& values) {
  // One all-reduce MAX of the values and their negations: the same everywhere when the maximum and
  // the minimum are this rank's own.
  std::vector<double> both = values;
  for (double v : values) both.push_back(-v);
  const std::vector<double> most = max(both);
  for (size_t i = 0; i < values.size(); ++i)
    if (most[i] != values[i] || most[values.size() + i] != -values[i]) return false;
  return true;
}

std::string ReplicaGroup::broadcast(const std::string& bytes) {
  at::Tensor length = at::tensor({static_cast<int64_t>(bytes.size())}, at::kLong);
  std::vector<at::Tensor> ts = {length};
  run("broadcasting the placement", [&] { group_->broadcast(ts)->wait(); });
  at::Tensor data = at::empty({length.item<int64_t>()}, at::kByte);
  if (config_.rank == 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  ts = {data};
  run("broadcasting the placement", [&] { group_->broadcast(ts)->wait(); });
  return std::string(reinterpret_cast<const char*>(data.data_ptr()),
                     static_cast<size_t>(data.numel()));
}

void ReplicaGroup::broadcast(const std::vector<at::Tensor>& tensors,
                             const std::vector<int>& slots) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    at::NoGradGuard no_grad;
    const Route& via = route(slots.at(i), t.device());
    // Gloo sends contiguous CPU memory (a tensor elsewhere goes through a CPU copy), NCCL
    // contiguous memory on its GPU.
    at::Tensor staged = t.detach();
    if (!via.nccl && !t.device().is_cpu()) staged = staged.to(at::kCPU);
    staged = staged.contiguous();
    std::vector<at::Tensor> ts = {staged};
    run("broadcasting rank 0's parameters",
        [&] { complete(via, via.nccl ? via.nccl->broadcast(ts) : group_->broadcast(ts)); });
    if (staged.data_ptr() != t.data_ptr()) t.detach().copy_(staged);
  }
}

void ReplicaGroup::average_gradients(const std::vector<at::Tensor>& parameters,
                                     const std::vector<int>& slots) {
  at::NoGradGuard no_grad;
  // Buckets by (job GPU or host memory, dtype) in parameter order; every rank builds the same ones.
  std::map<std::pair<int, int>, std::vector<std::vector<at::Tensor>>> buckets;
  std::map<std::pair<int, int>, uint64_t> filled;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const at::Tensor& p = parameters[i];
    if (!p.requires_grad()) continue;
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    if (!g.defined()) g = at::zeros_like(p);
    const auto key =
        std::make_pair(pairing(slots.at(i), p.device()), static_cast<int>(p.scalar_type()));
    auto& list = buckets[key];
    const uint64_t bytes = static_cast<uint64_t>(g.numel()) * g.element_size();
    if (list.empty() || filled[key] + bytes > config_.bucket_bytes) {
      list.emplace_back();
      filled[key] = 0;
    }
    list.back().push_back(g);
    filled[key] += bytes;
  }
  const double scale = 1.0 / config_.world_size;
  for (auto& [key, list] : buckets)
    for (const std::vector<at::Tensor>& bucket : list) {
      const Route& via = route(key.first, bucket.front().device());
      // NCCL reduces on the GPU, Gloo in host memory.
      std::vector<at::Tensor> flat_parts;
      for (const at::Tensor& g : bucket)
        flat_parts.push_back(via.nccl ? g.reshape({-1}) : g.reshape({-1}).to(at::kCPU));
      at::Tensor flat = at::cat(flat_parts);
      std::vector<at::Tensor> ts = {flat};
      run("averaging the gradients",
          [&] { complete(via, via.nccl ? via.nccl->allreduce(ts) : group_->allreduce(ts)); });
      flat.mul_(scale);
      int64_t offset = 0;
      for (const at::Tensor& g : bucket) {
        g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
        offset += g.numel();
      }
    }
}

}  // namespace placement::detail
