#pragma once
// Predicts the step time and memory of a placement from a profiled graph and a device topology.
// Used offline (placementctl simulate/optimize), by the memory pre-screen of live candidates, and
// by tests and benchmarks. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "planning/sim/cost_model.h"
#include "planning/sim/topology.h"

namespace placementd::sim {

struct SimulatorOptions {
  /// Optimizer state per parameter byte: 2 for Adam (two moments), 1 for SGD with momentum, 0 for
  /// SGD.
  double optimizer_state_factor = 2.0;
  /// Fraction of each device's memory kept free ([devices].memory_headroom_fraction).
  double memory_headroom_fraction = 0.0;
  /// CPU devices are one host: their ops run one at a time, never in parallel with each other
  /// (logical CPU devices "cpu:0", "cpu:1" stand in for GPUs in tests, but share the cores).
  bool cpu_devices_share_host = true;
  /// Devices that share one execution resource, as `shared_with[d]`: the first device of d's group
  /// (d itself, or an index below it; empty: none share, but CPU devices as above). Devices of one
  /// group run one op at a time between them, as time-sliced slices of one GPU do. The work bound
  /// ignores it (it stays a lower bound, a looser one).
  std::vector<size_t> shared_with;
  /// Math modes of the job, for ops timed by the cost model.
  MathModes math;
  /// Data-parallel replicas: the same placement runs on `count` nodes, and every step's gradients
  /// are averaged by a ring all-reduce over the link between nodes, in buckets per device.
  struct Replicas {
    int count = 1;
    NodeLink link;
    uint64_t bucket_bytes = 25ull << 20;
    /// A bucket's all-reduce starts as soon as its gradients are ready, during backward (torch's
    /// DistributedDataParallel); false: once backward is over (placementd's SDK today).
    bool overlap = false;
  } replicas;
};

/// Each device's execution resource under `options`: the first device of the devices that run one
/// op at a time between them (SimulatorOptions::shared_with, and CPU devices where they share the
/// host), itself where it shares with none.
std::vector<size_t> execution_resources(const SimulatorOptions& options,
                                        const placement::DeviceSet& devices);

/// Memory a placement needs on one device, by what it is for.
struct MemoryUse {
  uint64_t parameters = 0;  // parameters + gradients + optimizer state
  uint64_t activations =
      0;  // kept for backward, including copies of inputs received from other devices
  uint64_t transient = 0;  // the largest single output (a working buffer)
  uint64_t capacity = 0;   // usable: memory × (1 − headroom)
  uint64_t peak() const { return parameters + activations + transient; }
};

struct SimulationResult {
  /// False when a device runs out of memory; `invalid_reason` names the device and the bytes.
  bool valid = true;
  std::string invalid_reason;
  double step_time_s = 0.0;
  double forward_s = 0.0;   // end of the forward pass
  double backward_s = 0.0;  // end of the backward pass (from step start)
  /// Compute time per device (forward + backward + update).
  std::vector<double> busy_s;
  std::vector<MemoryUse> memory;
  uint64_t transferred_bytes = 0;
  size_t transfers = 0;
  /// Ops whose time came from the cost model (no profile for the kind of device they ran on).
  size_t predicted_ops = 0;
  /// With replicas: how long the node link all-reduces the gradients, the part of it the step
  /// waits for beyond backward's end, and the bytes and buckets each node sends into the ring.
  double allreduce_s = 0.0;
  double allreduce_exposed_s = 0.0;
  uint64_t allreduce_bytes = 0;
  size_t allreduce_buckets = 0;

  /// Indices of the devices whose peak memory exceeds their capacity (why it is invalid).
  std::vector<size_t> over_capacity() const {
    std::vector<size_t> out;
    for (size_t d = 0; d < memory.size(); ++d)
      if (memory[d].peak() > memory[d].capacity) out.push_back(d);
    return out;
  }
};

/// Model (documented in docs/simulator.md): each device (all CPU devices together, by default)
/// runs its ops one at a time in the graph's
/// topological order, devices in parallel; an op starts when its device is free and its inputs have
/// arrived; a tensor crosses a link once per destination device, links carry one transfer at a time
/// (latency + bytes / bandwidth). Backward runs in reverse order after the forward pass, gradients
/// crossing the same links back; the optimizer update of each device's parameters follows the
/// backward pass. An op's time on a device is its profile for that device kind divided by the
/// device's relative speed; without one, the cost model's prediction from the op's work and the
/// device's spec (cost_model.h).
///
/// Construction precomputes per-op costs; simulate() is O(ops + edges) and const, so one Simulator
/// can serve many placements from several threads.
class Simulator {
 public:
  /// Throws std::invalid_argument if the graph, the device set or the replicas are invalid (more
  /// than one without a node link).
  Simulator(placement::OpGraph graph, placement::DeviceSet devices, SimulatorOptions options = {});

  /// Throws std::invalid_argument if the placement does not fit the graph/devices, or puts an op on
  /// a device it can be timed on neither way: no profile for the device's kind and no spec on the
  /// device, or no work recorded in the graph (a file from before placementd counted it).
  SimulationResult simulate(const placement::Placement& placement) const;

  /// simulate()'s step time alone, without the memory check: for a model whose memory another one
  /// checked (sim::with_model_error's copies differ from their original in times only). Throws as
  /// simulate() does.
  double step_time_s(const placement::Placement& placement) const;

  /// Memory only (the cheap pre-screen of live candidates): `valid`, `invalid_reason` and `memory`
  /// are filled, times are not. Needs no profile beyond activation bytes.
  SimulationResult check_memory(const placement::Placement& placement) const;

  /// max(critical path with each op at its fastest device, the busiest device's least work given
  /// the devices' memory (work_bound_s)); transfers free: no valid placement can beat it. Ops that
  /// cannot be timed on any device count nothing. Infinite when the model's memory exceeds all
  /// devices together (no placement is valid). Plus the least of the devices' step overheads
  /// (DeviceSpec::step_s), which every placement pays. With replicas, the all-reduce of every
  /// gradient in the fewest buckets: added after backward, or without overlap the bound's floor.
  double lower_bound_s() const;
  /// The least time the busiest device works, with ops split fractionally over the devices within
  /// their usable memory: where the fastest devices cannot hold the model, work must go to slower
  /// ones, and the bound rises with it (simulator.cpp has the derivation).
  double work_bound_s() const;

  /// What any placement needs in memory, wherever its ops go: every op's parameters (with gradients
  /// and optimizer state) and kept activations; transfers only add copies. Against the devices'
  /// usable capacities: whether it fits on the largest one, and on all of them together.
  struct MemoryFloor {
    uint64_t bytes = 0;
    uint64_t all_devices_bytes = 0;  // the devices' usable memory together
    bool fits_one_device = true;
    bool fits_all_devices = true;
  };
  MemoryFloor memory_floor() const;

  /// Ops that have no profile for the kind of `device`, and so are timed there by the cost model.
  size_t predicted_op_count(int device) const;
  /// Ops that cannot be timed on `device` at all, and why for the first of them ("" when none).
  std::pair<size_t, std::string> untimeable_ops(int device) const;

  /// The graph, with predicted profiles where the cost model timed ops (add_predicted_profiles).
  const placement::OpGraph& graph() const { return graph_; }
  const placement::DeviceSet& devices() const { return devices_; }
  const SimulatorOptions& options() const { return options_; }

 private:
  struct Cost {
    double forward = -1, backward = -1, update = -1;  // -1: cannot be timed on that device
    bool predicted = false;
  };
  /// Cost of `op` on `device`; throws std::invalid_argument naming why when it cannot be timed.
  const Cost& cost(int op, int device) const;
  /// Why `op` cannot be timed on `device`: what is missing and what to do about it.
  std::string why_untimeable(int op, int device) const;
  /// Usable memory of a device: memory × (1 − headroom).
  uint64_t capacity(size_t device) const;
  /// Memory an op's parameters take with their gradients and optimizer state.
  uint64_t parameter_state_bytes(size_t op) const;
  /// Whether `device` can hold `op` alone: its state, what it keeps and its output as the working
  /// buffer. An op it cannot is on no device like it in any valid placement (the output layer of a
  /// large vocabulary, which only the host can hold).
  bool holds_alone(size_t op, size_t device) const;
  /// The least DeviceSpec::step_s among the devices (0 for one without a spec).
  double least_step_overhead_s() const;
  /// A ring all-reduce of `bytes` over options_.replicas: 2(N−1) messages of bytes ÷ N each way.
  double ring_allreduce_s(uint64_t bytes) const;
  /// Buckets the gradients of `placement` (per device, in the order backward makes them ready:
  /// `backward_end`) and runs them through the node link; returns when the last is averaged.
  double all_reduce(const placement::Placement& placement, const std::vector<double>& backward_end,
                    double backward_done, SimulationResult& result) const;
  Cost time_on(const placement::Op& op, const placement::Device& device) const;
  /// Gives graph_'s ops, for each device kind with an unprofiled op that a device of that kind can
  /// predict, the prediction for the first such device (OpProfile::predicted), so that placers
  /// and groupers reading graph() see every kind. The simulator's own costs stay per device.
  void add_predicted_profiles();
  void fill_memory(const placement::Placement& placement, SimulationResult& result) const;
  /// simulate(), with or without its memory check (step_time_s()).
  SimulationResult schedule(const placement::Placement& placement, bool check_memory) const;

  placement::OpGraph graph_;
  placement::DeviceSet devices_;
  SimulatorOptions options_;
  std::vector<int> order_;
  /// CSR adjacency: for op u, in_edges_[in_begin_[u] .. in_begin_[u+1]) are the edges into it
  /// (copies of graph_'s, in its order), out_edges_ likewise those out of it.
  std::vector<int> in_begin_, out_begin_;
  std::vector<placement::Edge> in_edges_, out_edges_;
  /// The execution resource each device's work runs on (itself, the host its CPU devices share,
  /// or the device it is grouped with: SimulatorOptions), each device's kind, and each op's pinned
  /// kind (-1: none): what simulate() reads per op instead of the ops and devices themselves.
  std::vector<size_t> resource_;
  std::vector<int> device_kind_, pinned_kind_;
  /// Cost of op u on device d at costs_[u * devices + d].
  std::vector<Cost> costs_;
  std::vector<uint64_t> activation_bytes_;
  // What simulate() schedules into, per thread (simulator.cpp).
  struct Scratch {
    std::vector<double> device_free, link_free, arrival, forward_end, backward_end, update;
    std::vector<char> used;
  };
  /// Per op, fixed at construction: its parameters' value, gradient and optimizer state, and its
  /// outputs (simulate() reads both for every op of every placement).
  std::vector<uint64_t> state_bytes_, output_bytes_;
};

}  // namespace placementd::sim
