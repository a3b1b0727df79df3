// The replica group's collectives in one process, a thread per rank over a real TCPStore and real
// c10d process groups on 127.0.0.1: which backend carries each device's tensors, and that the
// gradients come back averaged where they live. The CUDA tests skip without a GPU (CI has none);
// scripts/gpu-run.sh --stage test runs them on the GPU machine, which has one.

#include <gtest/gtest.h>
#include <signal.h>

#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>

#include "http_get.h"
#include "job_core.h"
#include "optimizer_state.h"
#include "replica_group.h"
#include "step_peers.h"
#include "traced_model.h"

namespace placement::detail {
namespace {

ReplicaConfig config(int rank, int world_size, int port,
                     CudaCollectives mode = CudaCollectives::kAuto) {
  ReplicaConfig c;
  c.rank = rank;
  c.world_size = world_size;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout = std::chrono::milliseconds(20000);
  c.cuda_collectives = mode;
  return c;
}

// Runs `body(rank)` on a thread per rank and rethrows the first rank's error, if any.
void on_every_rank(int world_size, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// A parameter of rank r on `device` whose gradient is r + 1 everywhere.
at::Tensor parameter_with_gradient(int rank, const at::Device& device) {
  at::Tensor p = at::zeros({3, 5}, at::TensorOptions().device(device)).requires_grad_(true);
  p.mutable_grad() = at::full({3, 5}, rank + 1.0, at::TensorOptions().device(device));
  return p;
}

TEST(CudaRoute, NcclWhenEveryRankHasAGpuOfItsOwn) {
  const CudaRoute r = route_cuda_device(CudaCollectives::kAuto, true, "cuda:0",
                                        {"a/0000:3b:00.0", "b/0000:3b:00.0"});
  EXPECT_TRUE(r.nccl);
  EXPECT_EQ(r.description, "nccl");
  EXPECT_TRUE(route_cuda_device(CudaCollectives::kNccl, true, "cuda:1",
                                {"a/0000:3b:00.0", "a/0000:5e:00.0"})
                  .nccl);
}

TEST(CudaRoute, RanksSharingAGpuGoThroughHostMemoryOrFailWhenNcclIsRequired) {
  const std::vector<std::string> shared = {"a/0000:3b:00.0", "a/0000:5e:00.0", "a/0000:3b:00.0"};
  const CudaRoute r = route_cuda_device(CudaCollectives::kAuto, true, "cuda:0", shared);
  EXPECT_FALSE(r.nccl);
  EXPECT_EQ(r.description,
            "gloo through host memory: ranks 0 and 2 both run cuda:0 on the GPU a/0000:3b:00.0, "
            "which NCCL refuses");
  try {
    route_cuda_device(CudaCollectives::kNccl, true, "cuda:0", shared);
    FAIL() << "kNccl accepted two ranks on one GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 2 both run cuda:0 on the GPU a/0000:3b:00.0"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("set cuda_collectives to auto or gloo"), std::string::npos)
        << e.what();
  }
}

TEST(CudaRoute, GlooWhenAskedForOrWithoutNccl) {
  EXPECT_EQ(route_cuda_device(CudaCollectives::kGloo, true, "cuda:0", {}).description,
            "gloo through host memory: cuda_collectives is gloo");
  EXPECT_EQ(route_cuda_device(CudaCollectives::kAuto, false, "cuda:0", {}).description,
            "gloo through host memory: this build of the SDK has no NCCL (LibTorch without CUDA)");
  EXPECT_THROW(route_cuda_device(CudaCollectives::kNccl, false, "cuda:0", {}), std::runtime_error);
}

TEST(ReplicaConfig, CudaCollectivesIsCarriedAndNcclNeedsABuildWithIt) {
  ReplicaOptions o;
  o.from_environment = false;
  o.rank = 1;
  o.world_size = 2;
  o.master_addr = "127.0.0.1";
  o.master_port = 29500;
  o.cuda_collectives = CudaCollectives::kGloo;
  EXPECT_EQ(replica_config(o)->cuda_collectives, CudaCollectives::kGloo);
  o.cuda_collectives = CudaCollectives::kNccl;
  if (nccl_built()) {
    EXPECT_EQ(replica_config(o)->cuda_collectives, CudaCollectives::kNccl);
  } else {
    EXPECT_THROW(replica_config(o), std::invalid_argument);
  }
}

TEST(ReplicaGroupOnCpu, AveragesGradientsThroughGlooAndSaysSo) {
  const int port = testing::free_port();
  std::vector<std::vector<float>> averaged(3);
  std::vector<std::map<std::string, std::string>> routes(3);
  on_every_rank(3, [&](int rank) {
    ReplicaGroup group(config(rank, 3, port));
    at::Tensor p = parameter_with_gradient(rank, at::kCPU);
    group.average_gradients({p}, {0});
    averaged[rank] =
        std::vector<float>(p.grad().data_ptr<float>(), p.grad().data_ptr<float>() + p.numel());
    routes[rank] = group.routes();
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(averaged[r], std::vector<float>(15, 2.0f)) << "rank " << r;  // (1 + 2 + 3) / 3
    EXPECT_EQ(routes[r], (std::map<std::string, std::string>{{"cpu", "gloo"}})) << "rank " << r;
  }
}

void count_pipes(int) {}

TEST(ReplicaGroupOnCpu, APeerThatDiesIsAnErrorNotASignalUnlessTheJobHandlesSigpipeItself) {
  // c10d's sockets write without MSG_NOSIGNAL: with SIGPIPE at its default, a rank writing to a
  // dead peer ended at once, by the signal, instead of with an error that names the peer.
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &before), 0);
  ::signal(SIGPIPE, SIG_DFL);
  { ReplicaGroup group(config(0, 1, testing::free_port())); }
  struct sigaction now {};
  ::sigaction(SIGPIPE, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  ::signal(SIGPIPE, count_pipes);
  { ReplicaGroup group(config(0, 1, testing::free_port())); }
  ::sigaction(SIGPIPE, nullptr, &now);
  EXPECT_EQ(now.sa_handler, &count_pipes) << "the job's own handler stays";
  ::sigaction(SIGPIPE, &before, nullptr);
}

// Adam, whose copies of its state fail when `fail`.
class StateCopiesFailOn final : public StepOptimizer {
 public:
  StateCopiesFailOn(torch::optim::Adam& adam, bool fail) : adam_(adam), fail_(fail) {}
  void step() override { adam_.step(); }
  void zero_grad() override { adam_.zero_grad(); }
  uint64_t move_state(const std::vector<at::Tensor>& p,
                      const std::vector<c10::Device>& d) override {
    return TorchStepOptimizer(adam_).move_state(p, d);
  }
  std::optional<StagedState> stage_state(const std::vector<at::Tensor>& p,
                                         const std::vector<c10::Device>& d) override {
    if (fail_) throw std::runtime_error("injected: no room for the moments");
    return TorchStepOptimizer(adam_).stage_state(p, d);
  }

 private:
  torch::optim::Adam& adam_;
  bool fail_;
};

TEST(ReplicaGroupOnCpu, ASwapThatFailsOnOneRankMovesNoRankAndNothingMovesBack) {
  const int port = testing::free_port();
  std::vector<std::vector<int>> placements(2);
  std::vector<uint64_t> failed(2), swaps(2);
  std::vector<bool> switched(2), moved_back(2);
  on_every_rank(2, [&](int rank) {
    testing::TracedModel m = testing::load_traced_model("rnnlm_small");
    JobCore core;
    core.graph = m.graph;
    core.devices = testing::logical_cpus(2);
    core.placed = std::make_unique<PlacedModule>(m.module, m.graph, core.devices);
    core.group = std::make_unique<ReplicaGroup>(config(rank, 2, port));
    torch::optim::Adam adam(core.placed->parameters(), torch::optim::AdamOptions(0.01));
    core.placed->forward(m.inputs).at(0).toTensor().pow(2).mean().backward();
    adam.step();
    std::vector<const void*> memory;
    for (const at::Tensor& p : core.placed->parameters()) memory.push_back(p.data_ptr());
    ReceivedDirective target;
    target.directive.placement_id = 5;
    target.directive.placement = Placement::single(m.graph, 1);

    StateCopiesFailOn failing_on_rank_1(adam, rank == 1);
    EXPECT_FALSE(switch_together(core, failing_on_rank_1, target));
    size_t i = 0;
    for (const at::Tensor& p : core.placed->parameters())
      moved_back[rank] = moved_back[rank] || p.data_ptr() != memory[i++];
    failed[rank] = core.stats.failed_swaps;
    placements[rank] = core.placed->placement().device_of_op;

    StateCopiesFailOn movable(adam, false);
    switched[rank] = switch_together(core, movable, target);
    swaps[rank] = core.stats.swaps;
    for (const at::Tensor& p : core.placed->parameters())
      EXPECT_EQ(core.placed->device_of(p), 1) << "rank " << rank;
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(placements[rank], std::vector<int>(placements[rank].size(), 0)) << "rank " << rank;
    EXPECT_FALSE(moved_back[rank]) << "rank " << rank << ": no copy was installed, none undone";
    EXPECT_EQ(failed[rank], 1u) << "rank " << rank;
    EXPECT_TRUE(switched[rank]) << "rank " << rank;
    EXPECT_EQ(swaps[rank], 1u) << "rank " << rank << ": the failed swap moved nothing";
  }
}

class CudaReplicas : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// The NCCL path itself on a machine with one GPU: a group of one rank still builds the
// communicator, reduces on the GPU and leaves the gradient there.
TEST_F(CudaReplicas, AGroupOfOneAveragesOnTheGpuThroughNccl) {
  ASSERT_TRUE(nccl_built());
  ReplicaGroup group(config(0, 1, testing::free_port(), CudaCollectives::kNccl));
  at::Tensor p = parameter_with_gradient(4, at::Device(at::kCUDA, 0));
  group.broadcast(std::vector<at::Tensor>{p}, {0});
  group.average_gradients({p}, {0});
  EXPECT_TRUE(p.grad().is_cuda());
  EXPECT_TRUE(at::equal(p.grad().cpu(), at::full({3, 5}, 5.0f)));
  EXPECT_EQ(group.routes().at("cuda:0"), "nccl");
}

// Two ranks on two GPUs, rank r on cuda:r (the job device at position 0 on both): NCCL averages on
// each GPU. Skips on a machine with one GPU.
TEST_F(CudaReplicas, TwoRanksOnTwoGpusAverageThroughNccl) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "one GPU";
  const int port = testing::free_port();
  std::vector<std::vector<float>> averaged(2);
  std::vector<std::string> routes(2);
  on_every_rank(2, [&](int rank) {
    ReplicaGroup group(config(rank, 2, port, CudaCollectives::kNccl));
    at::Tensor p =
        parameter_with_gradient(rank, at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank)));
    group.average_gradients({p}, {0});
    ASSERT_EQ(p.grad().device().index(), rank);
    const at::Tensor g = p.grad().cpu();
    averaged[rank] = std::vector<float>(g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
    routes[rank] = group.routes().at("cuda:" + std::to_string(rank));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(averaged[r], std::vector<float>(15, 1.5f)) << "rank " << r;
    EXPECT_EQ(routes[r], "nccl");
  }
}

// Two ranks on one GPU, which NCCL refuses ("Duplicate GPU detected"): auto goes through host
// memory and says why; nccl fails on every rank with the ranks and the GPU named.
TEST_F(CudaReplicas, TwoRanksOnOneGpuAverageThroughHostMemoryOrRefuseNccl) {
  const int port = testing::free_port();
  std::vector<std::string> routes(2);
  std::vector<std::vector<float>> averaged(2);
  on_every_rank(2, [&](int rank) {
    ReplicaGroup group(config(rank, 2, port));
    at::Tensor p = parameter_with_gradient(rank, at::Device(at::kCUDA, 0));
    group.average_gradients({p}, {0});
    ASSERT_TRUE(p.grad().is_cuda());
    const at::Tensor g = p.grad().cpu();
    averaged[rank] = std::vector<float>(g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
    routes[rank] = group.routes().at("cuda:0");
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(averaged[r], std::vector<float>(15, 1.5f)) << "rank " << r;
    EXPECT_NE(routes[r].find("gloo through host memory: ranks 0 and 1 both run cuda:0"),
              std::string::npos)
        << routes[r];
  }
  const int nccl_port = testing::free_port();
  std::vector<std::string> errors(2);
  on_every_rank(2, [&](int rank) {
    ReplicaGroup group(config(rank, 2, nccl_port, CudaCollectives::kNccl));
    at::Tensor p = parameter_with_gradient(rank, at::Device(at::kCUDA, 0));
    try {
      group.average_gradients({p}, {0});
    } catch (const std::runtime_error& e) {
      errors[rank] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("which NCCL refuses"), std::string::npos) << errors[r];
}

}  // namespace
}  // namespace placement::detail
