#pragma once
// The job API: what a training loop writes to let placementd place its model while it trains.
//
//   auto job = placement::attach("gnmt-train", module, example_inputs);
//   torch::optim::Adam optimizer(job->parameters(), 1e-3);
//   for (...) job->step({src, tgt}, loss_fn, optimizer);
//
// Implemented in libplacement_torch; LibTorch types are only forward-declared here.

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/devices.h"
#include "placement/engine.h"
#include "placement/graph.h"
#include "placement/job_channel.h"
#include "placement/job_stats.h"
#include "placement/model.h"
#include "placement/placement.h"
#include "placement/step_optimizer.h"
#include "placement/torch_fwd.h"

namespace placement {

namespace detail {
struct JobCore;
}

/// Which c10d backend averages the gradients (and broadcasts the parameters) that live on a CUDA
/// device. Those on CPU devices always go through Gloo.
enum class CudaCollectives {
  /// NCCL, on the GPU, when every rank's device is a GPU of its own and the SDK was built with
  /// NCCL; otherwise Gloo through host memory. JobStats::collectives says which and why.
  kAuto,
  /// NCCL or an error: ranks that share a GPU (which NCCL refuses) or a build without NCCL fail
  /// with a message that says so.
  kNccl,
  /// Gloo through host memory, always.
  kGloo,
};

/// Data-parallel replicas (torch.distributed's c10d: Gloo, and NCCL for CUDA devices): the same
/// model trained in WORLD_SIZE processes, each on its own share of the data, the gradients averaged
/// across them before every update. One placement holds for the whole group: rank 0's placementd
/// chooses it, every rank applies it at the same step boundary, and a candidate is timed by the
/// slowest rank.
struct ReplicaOptions {
  /// Take what is unset below from torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR,
  /// MASTER_PORT. No WORLD_SIZE, or 1: one process, no group.
  bool from_environment = true;
  int rank = -1;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  /// The rendezvous and every collective fail after this long (a rank that died or hangs) with an
  /// error from Job's constructor or Job::step, never a hang.
  int timeout_ms = 60000;
  /// Gradients go across in flat buckets of at most this many bytes (per device and dtype), so
  /// that small tensors do not cost a collective each.
  uint64_t bucket_bytes = 25ull << 20;
  /// What carries the tensors of CUDA devices between the ranks.
  CudaCollectives cuda_collectives = CudaCollectives::kAuto;
};

struct JobOptions {
  /// Empty: $PLACEMENTD_SOCKET, else the system default.
  std::string socket_path;
  /// The devices placementd may use for this job, e.g. {"cpu", "cuda:0", "cuda:1"}. Empty: two
  /// logical CPU devices ("cpu:0", "cpu:1"), which is what a machine without a GPU offers.
  std::vector<std::string> devices;
  /// Memory per device in bytes (the memory model's capacity). 0: for CPU devices the host's
  /// memory divided among them, for a CUDA device its own memory as the device reports it.
  uint64_t memory_bytes = 0;
  /// Steps the job intends to run (0: unknown); placementd then bounds exploration to its
  /// configured fraction of them.
  uint64_t expected_steps = 0;
  /// false: never contact placementd, train on the start placement (the control run).
  bool use_daemon = true;
  /// How often to try reaching placementd again while it is away.
  int reconnect_interval_ms = 1000;
  /// The job's own starting placement; empty: every op on the first device.
  std::vector<int> start_device_of_op;
  /// Where the job's tensors live when it starts (placement.h, Residence): per parameter of the
  /// captured graph (Job::graph().parameters) its home and how its readers fetch it, per op
  /// whether its outputs are kept, offloaded or recomputed. Empty: every parameter where its
  /// first reader runs, every activation kept. A residence that cannot run (a recompute of an op
  /// that updates buffers or reads buffers the forward updates, sizes of another graph) is
  /// refused with std::invalid_argument; one that cannot fit (logical devices with
  /// memory_limit_bytes) is refused before it runs (see memory_limit_bytes).
  Residence start_residence;
  /// The same by module name, resolved against the captured graph when start_residence is empty.
  ResidenceRules start_residence_rules;
  /// Per device (in `devices` order), a limit on the bytes a logical CPU device may hold while a
  /// step's forward and backward run, counted where memory is allocated: what lives there
  /// between steps (parameters and buffers at home, their gradients and optimizer state, proxies)
  /// and everything the step allocates while running ops placed there (activations, autograd's
  /// saved tensors, temporaries) until it is freed. An allocation past it fails like an
  /// out-of-memory on a GPU (c10::OutOfMemoryError), and a placement placementd proposed is rolled
  /// back as for any failure; a start placement whose parameters and gradients alone cannot fit
  /// is refused at attach, and a step is refused before it runs (the same error) when what lives
  /// there with the gradients to come and the state the optimizer's first update makes
  /// (StepOptimizer::expected_state_bytes) cannot fit. 0 or absent: no limit (CUDA devices always
  /// have their allocator's). For exercising the failure path without a GPU and for emulating GPU
  /// capacities on one host; placementd is not told (it plans with `memory_bytes`). With a limit
  /// the job also measures each device's peak (JobStats::peak_bytes).
  std::vector<uint64_t> memory_limit_bytes;
  /// An OpGraph JSON of this same model and inputs with per-op profiles (`placementctl capture
  /// MODEL --input ... --profile cpu -o FILE`): its profiles go up with the graph, so placementd's
  /// simulator can time placements (the "simulator" warm start, list_scheduling). Empty: none. The
  /// job refuses a file captured from another model or other input shapes (the fingerprints
  /// differ).
  std::string profile_graph_file;
  /// When placementd asks (its simulator needs per-op costs on a device kind the graph has none
  /// for), the job profiles this many of its training steps under the placement asked about,
  /// after one warm-up step, and sends each op's median times and activation bytes. The steps are
  /// real training steps, only slower by the instrumentation (a per-op device sync on GPUs); they
  /// are reported as profiled so their time is no measurement of the placement. 0: never.
  int profile_steps = 3;
  /// Data-parallel replicas; by default from torchrun's environment when WORLD_SIZE > 1.
  ReplicaOptions replicas;
  /// How many optimizer steps after each change to one of placementd's placements run guarded:
  /// the parameters and the optimizer's state (StepOptimizer::save_state) are copied to host
  /// memory first, so that an update that fails there (Adam's temporaries on a device the
  /// placement filled, a failure half way through a foreach step) is undone and the step runs
  /// again on the last good placement, as a failed forward or backward does. An update allocates
  /// the same at every step of one placement, so the first is where a placement's update fails.
  /// -1: every step under placementd's placements (a copy of the parameters and the state each
  /// step); 0: none, and an update that fails is the user's error. Every rank of a replica group
  /// needs the same value.
  int guarded_updates = 1;
  /// Under a residence that keeps trained parameters on the host while their readers run on
  /// another device, update each of them there as soon as its gradient is home, while the
  /// backward goes on (StepOptimizer::steps_parameters_apart; docs/capture-and-engine.md,
  /// "Residence"). Under placementd's placements each batch so updated is copied first, so that a
  /// failed step puts it back before it runs again; under the job's own, a failure leaves what
  /// was updated, as a failing step() would. false: every parameter in one step() after the
  /// backward.
  bool overlap_updates = true;
  /// The most page-locked host memory this process may hold for what it copies between the host
  /// and its GPUs (the pinned pool: parameters that live on the host, gradients sent there,
  /// offloaded activations, migration staging; docs/capture-and-engine.md). 0: what placementd
  /// says at attach (its `[memory] host_pinned_bytes`), else a quarter of the physical memory;
  /// otherwise at most what placementd says. A step that needs more fails with
  /// c10::OutOfMemoryError naming the budget (under placementd's candidate: retried on the last
  /// good placement). One budget per process: the last job made sets it.
  uint64_t host_pinned_bytes = 0;
};

/// The outputs of the module's forward → the loss to minimise. The outputs are where the
/// placement put the ops that made them. What the loss throws under one of placementd's
/// placements is the user's own, rethrown at once and blamed on no placement, when the outputs
/// sit on the devices the job's own placement gives them (so it would fail there too); it is
/// taken for the placement's failure, and the step runs again on the last good placement, when
/// it is a device's (out of memory, an accelerator error) or the outputs are elsewhere (a loss
/// mixing them with labels on the job's device fails because of the placement). Under the job's
/// own placement it is rethrown. StepInterrupted always ends the step at once.
using LossFunction = std::function<at::Tensor(const std::vector<c10::IValue>& outputs)>;

/// Thrown by a LossFunction to end the step at once, unretried and blamed on no placement: the
/// user stops training (the Python SDK throws it for KeyboardInterrupt and SystemExit).
class StepInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// 16 hex digits over every tensor's bytes in order (FNV-1a): equal digests, equal parameters.
/// Replicas of a data-parallel job print it to show that they agree.
std::string parameters_digest(const std::vector<at::Tensor>& tensors);

/// A model in training whose placement placementd chooses. Not thread-safe: the training thread
/// uses it. If placementd is unreachable or dies, the job keeps training on its current
/// placement and re-attaches when the daemon is back.
class Job {
 public:
  /// Captures `model` with `example_inputs`, builds the placed module on the job's start
  /// placement and starts talking to placementd in the background. Throws CaptureError for a model
  /// that cannot be captured, std::invalid_argument for bad options; never for daemon problems.
  Job(std::string name, const Model& model, const std::vector<at::Tensor>& example_inputs,
      JobOptions options = {});
  /// The same for a TorchScript module (Model::from_torchscript).
  Job(std::string name, const torch::jit::Module& module,
      const std::vector<at::Tensor>& example_inputs, JobOptions options = {});
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  /// The module's parameters, for the optimizer (they stay the same tensors across placements).
  std::vector<at::Tensor> parameters() const;

  /// One training step: applies a pending placement (migrating parameters, buffers and optimizer
  /// state), runs forward, `loss`, backward, optimizer.step() and zero_grad(), times it and reports
  /// the time to placementd without waiting. If forward, `loss`, backward or a guarded update
  /// (JobOptions::guarded_updates) throws under a placement placementd proposed (out of memory
  /// included), the parameters and optimizer state an update changed are put back, the
  /// gradients are discarded, the
  /// buffers and random generators are put back as the step found them, the job moves back to the
  /// last placement that ran (to its own when that is the one failing), reports the failure and
  /// runs the same batch there: no batch is lost and parameters and buffers end as if the
  /// candidate was never tried. An error under the job's own placement is the model's and is
  /// rethrown. StepInterrupted from `loss`, and an error of `loss` that is the user's own (see
  /// LossFunction), ends the step at once, unretried (in a replica group every rank's step ends).
  /// The step holds the outputs only until `loss` returns, as an eager loop does, so that the
  /// backward may take their memory (a copy `loss` keeps of one stays alive). Returns the loss
  /// (detached).
  at::Tensor step(const std::vector<c10::IValue>& inputs, const LossFunction& loss,
                  torch::optim::Optimizer& optimizer);
  /// The same with an optimizer that is not a torch::optim one.
  at::Tensor step(const std::vector<c10::IValue>& inputs, const LossFunction& loss,
                  StepOptimizer& optimizer);

  const Placement& placement() const;
  const OpGraph& graph() const;
  const DeviceSet& devices() const;
  PlacedModule& module();
  JobStats stats() const;
  /// The daemon connection's state (connected, session, attaches, reports sent/dropped).
  JobChannel::Status daemon() const;
  /// placementd's view of the job (JobChannel::show()): what it gained, what it runs, whether
  /// exploration finished. Throws when the job runs without placementd or cannot reach it.
  messages::JobInfo placementd_view() const;
  /// Detaches from placementd (the destructor does it too) and returns the final connection status.
  JobChannel::Status detach();

 private:
  std::unique_ptr<detail::JobCore> core_;
};

/// Same as the constructor, for the `auto job = placement::attach(...)` spelling.
std::unique_ptr<Job> attach(std::string name, const Model& model,
                            const std::vector<at::Tensor>& example_inputs, JobOptions options = {});
std::unique_ptr<Job> attach(std::string name, const torch::jit::Module& module,
                            const std::vector<at::Tensor>& example_inputs, JobOptions options = {});

/// A DeviceSet for device names as JobOptions takes them ("cpu", "cpu:1", "cuda:0"): each device's
/// memory is `memory_bytes` when given, else a CPU's share of the host's memory and a GPU's own
/// (read from the device), and its links are measured (measure_links).
DeviceSet job_devices(const std::vector<std::string>& names, uint64_t memory_bytes);

/// Times copies between each ordered pair of `devices` by the path a migration takes (a clone
/// between logical devices of one physical device, pinned DMA between host and GPU, NCCL between
/// GPUs; 4 KiB for the latency, 8 MiB for the bandwidth, median of 5) and writes the figures into
/// its link matrices, so that placementd plans with this machine's links. A few milliseconds per
/// pair of physical devices; logical devices of one physical device share its figures. Throws
/// std::runtime_error naming the pair when a copy fails (a GPU this process cannot use).
void measure_links(DeviceSet& devices);

}  // namespace placement
