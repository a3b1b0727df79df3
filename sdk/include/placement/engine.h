#pragma once
// Placed execution: run a captured model for training under any Placement. Implemented in
// libplacement_torch; LibTorch types are only forward-declared here.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/model.h"
#include "placement/placement.h"
#include "placement/torch_fwd.h"

namespace placement {

namespace detail {
class MemoryTally;
}

/// What a placement change moved.
struct MigrationStats {
  uint64_t bytes = 0;
  uint64_t tensors = 0;
};

/// What the engine did to keep tensors where the placement's residence says, since the placement
/// was set.
struct ResidenceActivity {
  /// Parameters read through a copy on their readers' device (a proxy), and of those the ones
  /// filled for each use (Fetch::kStream).
  uint64_t proxies = 0;
  uint64_t streamed = 0;
  /// Fills of a streamed proxy, in the forward and the backward, and of them those made ahead of
  /// the op that reads it (set_prefetch_window).
  uint64_t parameter_fetches = 0;
  uint64_t parameter_prefetches = 0;
  /// Bytes copied from parameters' homes into their proxies (each fill of a streamed one, each
  /// step's refresh of a persistent one), and of gradients copied from proxies to the homes.
  uint64_t parameter_bytes_fetched = 0;
  uint64_t gradient_bytes_sent_home = 0;
  /// Saved activations emptied (offloaded or dropped for a recompute), and their bytes.
  uint64_t activations_evicted = 0;
  uint64_t activation_bytes_evicted = 0;
  /// Outputs to recompute that the forward changed in place after their op made them (running
  /// the op again would not give them back): kept instead.
  uint64_t recompute_kept = 0;
};

/// Sees every op of PlacedModule::forward (the profiler uses it). Called on the forward thread.
class OpObserver {
 public:
  virtual ~OpObserver();
  virtual void before(int op) = 0;
  /// `outputs` are the op's results, on the op's device.
  virtual void after(int op, const std::vector<c10::IValue>& outputs) = 0;
};

/// A model (either front end's op program) executed op by op with every op on its placed device:
/// each op's tensor inputs are moved to its device (recorded by autograd, so loss.backward()
/// crosses devices as usual), factory ops create their tensors there, and each parameter lives on
/// the device of its first consumer. With all ops on one device the numbers equal the plain
/// module's.
///
/// Logical CPU devices ("cpu:0", "cpu:1") share the host; a tensor crossing between two of them is
/// copied (clone), so the cross-device path runs on machines without a GPU.
///
/// Not thread-safe. The module is shared, not copied: the parameters trained are the module's own
/// (an optimizer built over parameters() before or after set_placement() keeps working, because
/// parameters move in place).
class PlacedModule {
 public:
  /// `graph` must be capture()'s result for this module (checked: same ops in the same order).
  /// Starts with every op on device 0 of `devices`.
  PlacedModule(const Model& model, OpGraph graph, DeviceSet devices);
  /// The same for a TorchScript module (Model::from_torchscript).
  PlacedModule(const torch::jit::Module& module, OpGraph graph, DeviceSet devices);
  ~PlacedModule();
  PlacedModule(const PlacedModule&) = delete;
  PlacedModule& operator=(const PlacedModule&) = delete;

  /// Validates `placement` (sizes, pins, its residence), moves each parameter and buffer to its
  /// home (a buffer's is its first consumer's device, a parameter's what the residence says, by
  /// default the same) and routes ops accordingly. Call between steps. All or nothing: every
  /// tensor is copied to its new device before any is switched over, so a failed copy (out of
  /// memory) leaves the old placement intact. A tensor changing between logical devices of one
  /// physical device is copied too (values stay bitwise equal).
  ///
  /// Residence (placement.h): a parameter whose readers all run on one device other than its home
  /// is read there through a proxy (a leaf of its own, kept between steps or filled for each use),
  /// whose gradient goes to the parameter at home once autograd has summed it; the optimizer steps
  /// the parameter at home, and the next forward reads its new value. An op's outputs may be
  /// offloaded or recomputed between their last forward use and the backward. Gradients and
  /// results are bitwise those of the placement without residence (recomputed ops draw the same
  /// random numbers). Throws std::invalid_argument for a recompute of an op that updates the
  /// model's buffers in place or reads buffers the forward updates (batch norm's statistics), and
  /// for a residence on a graph without its parameter table.
  MigrationStats set_placement(const Placement& placement);

  /// set_placement in two halves, for a move that must succeed or fail together with it (the
  /// optimizer's state, which a job moves in between): stage() validates the placement and copies
  /// every tensor that moves, throwing with nothing changed when a copy fails; commit() switches
  /// the module over to those copies, which makes no copy and so does not fail. Until the commit
  /// the old tensors stay too. A Staged of another module, or staged before the module's
  /// placement last changed, is refused (std::logic_error, nothing changed).
  class Staged {
   public:
    Staged(Staged&&) noexcept;
    Staged& operator=(Staged&&) noexcept;
    ~Staged();
    /// Where a parameter or buffer will live once committed (as device_of() tells after).
    std::optional<int> device_of(const at::Tensor& parameter) const;

   private:
    friend class PlacedModule;
    struct Impl;
    explicit Staged(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  Staged stage(const Placement& placement) const;
  MigrationStats commit(Staged staged);
  /// The logical device (index into devices()) a parameter or buffer lives on; nullopt for a
  /// tensor that is not one of the module's, or that no op reads.
  std::optional<int> device_of(const at::Tensor& parameter) const;
  /// The physical device behind a logical one.
  c10::Device physical_device(int device) const;
  const Placement& placement() const;
  const OpGraph& graph() const;
  const DeviceSet& devices() const;

  /// One forward pass with autograd on. Inputs are moved to the devices of the ops that read them.
  std::vector<c10::IValue> forward(const std::vector<c10::IValue>& inputs);

  /// The module's parameters (requires_grad), for the optimizer.
  std::vector<at::Tensor> parameters() const;
  /// Drops the gradients of a failed step: the parameters' and their proxies'.
  void discard_gradients();
  /// Every tensor the module keeps between steps, with the logical device it lives on: its
  /// parameters and buffers at home, and the proxies of parameters read away from home.
  std::vector<std::pair<at::Tensor, int>> held_tensors() const;
  /// libplacement_torch's own (a job's measured memory): forward passes and their backward count
  /// what they allocate against each op's device in `tally` (nullptr: none). Not owned.
  void set_memory_tally(detail::MemoryTally* tally);
  ResidenceActivity residence_activity() const;
  /// Whether the placement in force keeps a trained parameter on the host while its readers run
  /// on another device (a proxy there): its whole gradient then reaches the host during the
  /// backward, and its update may start before the backward ends.
  bool sends_gradients_to_host() const;
  /// `tell` is called with each such parameter once its whole gradient is on its way home, on the
  /// thread autograd runs that part of the backward on, with what waits until the gradient is
  /// there (from a GPU it is copied aside, while the backward goes on): call it before reading
  /// the gradient. nullptr: nobody is told. For the placement in force; a placement change drops
  /// it.
  void on_gradient_home(
      std::function<void(const at::Tensor&, const std::function<void()>& landed)> tell);
  /// The host waits for every copy the residence has in flight (parameters fetched ahead,
  /// gradients on their way home): after the backward, before the gradients are read on the host
  /// or dropped. Throws what a failed copy threw.
  void settle_copies();
  /// Bytes of streamed parameters copied to their readers' device ahead of the op that reads
  /// them, in the order the last forward read them (the backward: about the reverse), on top of
  /// what the op itself reads. On a GPU each such copy runs on the GPU's copy stream while the ops
  /// before it compute; on the host it only fills earlier. Default: kDefaultPrefetchBytes where a
  /// parameter homed on the host streams to a GPU, none on the host; 0: each parameter is
  /// fetched when an op reads it. Applies to the placement in force and the next ones.
  void set_prefetch_window(std::optional<uint64_t> bytes);
  static constexpr uint64_t kDefaultPrefetchBytes = 256ull << 20;
  /// The model it runs.
  const Model& model() const;

  /// Routes the next forward passes through `observer` (nullptr: none). Not owned.
  void set_observer(OpObserver* observer);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace placement
