#pragma once
// What a placement's residence asks of each forward and backward pass (placement.h, Residence):
// parameters that live away from the device their readers run on are read through a proxy there,
// kept between steps (Fetch::kPersist) or filled for each use and emptied after it
// (Fetch::kStream); an op's saved outputs are offloaded or recomputed between their last use in
// the forward and the backward that needs them. Private to libplacement_torch; the engine
// (engine.cpp) drives it op by op.
//
// A proxy is a leaf of its own on the readers' device: autograd accumulates the parameter's
// gradient there exactly as eager PyTorch would on that device, and a hook after the accumulation
// copies it to the parameter's home, where the optimizer steps the user's own tensor. Storages are
// emptied and filled again in place (storage_shelf.h), so the autograd graph is eager's.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include "memory_tally.h"
#include "op_program.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "storage_shelf.h"

namespace placement::detail {

/// A parameter read through a proxy: the user's parameter at its home, and its stand-in on the
/// device its readers run on.
struct Proxy {
  at::Tensor parameter;
  at::Tensor proxy;
  c10::Device home = c10::kCPU;
  Fetch fetch = Fetch::kPersist;
  /// Logical device indices (of the DeviceSet) of the home and of the readers.
  int home_index = -1;
  int device_index = -1;
};

/// One placement's residence, resolved against the model: built (with the proxies' copies) before
/// the placement is committed, so that a failed copy leaves the old placement in force.
struct ResidencePlan {
  std::vector<Proxy> proxies;
  /// Per op of the graph: what becomes of its outputs (empty: all kept).
  std::vector<ActivationResidence> activations;
  /// Physical device per logical index, for offload targets.
  std::vector<c10::Device> devices;
  /// Bytes copied to make the persistent proxies.
  uint64_t bytes = 0;
  /// Bytes of streamed proxies filled ahead of their use, in the order the last pass read them
  /// (prefetch_order.h): on a GPU their copies run on its copy stream while the ops before them
  /// compute. 0: each filled when an op reads it.
  uint64_t prefetch_bytes = 0;

  bool empty() const { return proxies.empty() && activations.empty(); }
};

/// Resolves `placement`'s residence for `program`: which parameters need a proxy and which ops'
/// outputs are offloaded or recomputed. `home` gives each parameter's logical home under the
/// placement (the engine's rule), `devices` the physical device of each logical one. Copies the
/// persistent proxies' values (throwing, with nothing changed, when a copy fails). Throws
/// std::invalid_argument for a recompute the model cannot do faithfully: an op that updates the
/// model's buffers in place or reads buffers the forward updates (batch norm's statistics).
ResidencePlan resolve_residence(const OpProgram& program, const OpGraph& graph,
                                const Placement& placement, const std::vector<int>& op_of_node,
                                const std::vector<c10::Device>& devices);

/// What the residence runtime counts, for tests and the job's statistics.
struct ResidenceStats {
  /// Fills of a streamed proxy, in forwards and backwards; of them, those made ahead of use.
  uint64_t parameter_fetches = 0;
  uint64_t parameter_prefetches = 0;
  /// Bytes copied into proxies (streamed fills and persistent refreshes), and gradient bytes
  /// copied from proxies to their parameters' homes.
  uint64_t parameter_bytes_fetched = 0;
  uint64_t gradient_bytes_sent_home = 0;
  /// Activation storages offloaded or recomputed, and their bytes.
  uint64_t activations_evicted = 0;
  uint64_t activation_bytes_evicted = 0;
  /// Recomputed outputs that were changed in place after they were made, so that running their op
  /// again would not give them back: kept instead.
  uint64_t recompute_kept = 0;
};

/// What the backward's hooks share with the runtime (residence_runtime.cpp).
struct ResidenceShared;

/// The engine's side of a plan, for the passes run under it.
class ResidenceRuntime {
 public:
  explicit ResidenceRuntime(ResidencePlan plan);
  ~ResidenceRuntime();
  ResidenceRuntime(const ResidenceRuntime&) = delete;
  ResidenceRuntime& operator=(const ResidenceRuntime&) = delete;

  /// The proxy that stands for `parameter` on logical device `device`, if any.
  const Proxy* proxy_for(const at::Tensor& parameter, int device) const;

  /// A forward pass begins: persistent proxies take their parameters' current values (the
  /// optimizer stepped them at home).
  void begin_forward(const OpProgram& program);
  /// Before node `index` runs, on its inputs as the program holds them: empties what the forward
  /// has read for the last time and fills what the node reads (the proxies of the parameters it
  /// reads on its op's device among them). `op` is its op in the graph (-1 for plumbing),
  /// `device` the op's logical device (-1 for plumbing).
  void prepare(size_t index, int op, int device, const std::vector<c10::IValue>& stack);
  /// Then, on its inputs as the op takes them (moved to its device, proxies in place): notes what
  /// a recompute needs and where the op's autograd nodes begin.
  void before(size_t index, int op, int device, const std::vector<c10::IValue>& stack);
  /// After node `index` ran: learns which storages its outputs share, registers the op's own
  /// outputs under an offload or a recompute, and hooks the op's backward nodes so that what they
  /// saved is there when they run.
  void after(size_t index, int op, const std::vector<c10::IValue>& outputs);
  /// The forward ended (the program returned): evicts what is due.
  void end_forward();
  /// Counts what the runtime allocates (proxies filled, offloaded copies, recomputed outputs,
  /// gradients sent home) against the device it lands on (nullptr: nothing counted).
  void set_tally(MemoryTally* tally);
  /// `tell` is called, on the thread autograd runs the proxy's node on, with each parameter whose
  /// whole gradient is on its way to its home on the host, and what waits until it is there (a
  /// copy from a GPU runs aside; call it before reading the gradient). nullptr: nobody is told.
  void on_gradient_home(std::function<void(const at::Tensor&, const std::function<void()>&)> tell);
  /// The host waits for every copy in flight: proxies filled ahead and gradients on their way
  /// home. After a backward, before anything on the host reads the gradients; and before a
  /// failed step's tensors are dropped. Throws what a failed copy threw.
  void settle();
  /// Bytes of streamed proxies filled ahead of their use from now on
  /// (ResidencePlan::prefetch_bytes).
  void set_prefetch_window(uint64_t bytes);
  /// Whether some parameter that is trained lives on the host and is read through a proxy.
  bool sends_gradients_to_host() const;
  /// Drops the proxies' gradients (a failed step's), as the job drops its parameters'.
  void discard_gradients();
  const ResidencePlan& plan() const { return plan_; }
  ResidenceStats stats() const;

 private:
  struct Pass;
  void evict_due(size_t node);
  std::optional<StorageShelf::Id> shelve(const at::Tensor& output, ActivationResidence policy,
                                         int device, size_t position);
  ResidencePlan plan_;
  std::shared_ptr<ResidenceShared> shared_;
  std::unique_ptr<Pass> pass_;
  std::unordered_map<const c10::TensorImpl*, size_t> proxy_of_;
};

}  // namespace placement::detail
