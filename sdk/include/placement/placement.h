#pragma once
// Results of the policy: groupings and placements.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace placement {

class OpGraph;
class DeviceSet;

/// Assignment of every op to one of `num_groups` groups.
struct Grouping {
  /// group_of_op[op id] in [0, num_groups).
  std::vector<int> group_of_op;
  int num_groups = 0;

  /// Throws std::invalid_argument if sizes or group ids do not fit the graph.
  void validate(const OpGraph& graph) const;
  /// For each group, its op ids in ascending order.
  std::vector<std::vector<int>> members() const;
  bool operator==(const Grouping& other) const;
};

/// How an op on another device than a parameter's home reads the parameter.
enum class Fetch {
  /// A copy kept on the reader's device across steps, refreshed after each optimizer step (the
  /// plan of torchao's CPUOffloadOptimizer and of ZeRO-Offload: only the gradient, the optimizer
  /// state and the step leave the reader's device).
  kPersist,
  /// Copied in before each use and dropped after it, in the forward and again in the backward
  /// (the plan of FSDP2's CPUOffloadPolicy): between uses the reader's device holds none of it.
  kStream,
};

/// Where one trained parameter lives.
struct ParameterResidence {
  /// The device (index into the DeviceSet) that holds the parameter, its gradient and its
  /// optimizer state between uses, and where its optimizer step runs. -1: the device of its first
  /// reader, which is where every parameter lives without residence.
  int home = -1;
  /// How its readers get it when they all run on one device other than its home. A parameter
  /// read on two or more devices (a tied weight split by the placement) is copied from its home
  /// for each use and its gradient summed there, as without residence.
  Fetch fetch = Fetch::kPersist;

  bool operator==(const ParameterResidence& other) const;
};

/// What becomes of an op's outputs between their last use in the forward and the backward that
/// needs them (autograd's saved activations).
enum class ActivationPolicy {
  /// Kept where the op ran.
  kKeep,
  /// Copied to another device (the host) once the forward has read them for the last time, and
  /// copied back before the first backward node that needs them runs.
  kOffload,
  /// Dropped once the forward has read them for the last time, and computed again, with the same
  /// random numbers, before the first backward node that needs them runs.
  kRecompute,
};

struct ActivationResidence {
  ActivationPolicy policy = ActivationPolicy::kKeep;
  /// kOffload: the device the outputs wait on (index into the DeviceSet); -1 otherwise.
  int device = -1;

  bool operator==(const ActivationResidence& other) const;
};

/// The second half of a placement: where tensors live, apart from where ops run. Empty: every
/// parameter on its first reader's device and every activation kept, as a placement without
/// residence has always run.
struct Residence {
  /// Per parameter of the graph (OpGraph::parameters, in order); empty: all by the rule above.
  std::vector<ParameterResidence> parameters;
  /// Per op (in graph order); empty: every op's outputs kept.
  std::vector<ActivationResidence> activations;

  /// Whether it says nothing beyond the rule (no entry differs from the default).
  bool is_default() const;
  /// The same residence for a placement that runs its ops on `device_of_op`: an offload onto
  /// the device an op now runs on becomes a keep.
  Residence carried_to(const std::vector<int>& device_of_op) const;
  bool operator==(const Residence& other) const;
};

/// A residence written by module, as a user thinks of it: each rule names a prefix of module
/// names ("transformer.h.0" covers "transformer.h.0.attn.c_attn.weight" and the ops run in
/// "transformer.h.0.mlp"; "" covers everything), and the rule with the longest prefix that covers
/// a parameter or an op decides for it.
struct ResidenceRules {
  /// Parameter name prefix → where those parameters live.
  std::map<std::string, ParameterResidence> parameters;
  /// Module prefix → what becomes of the outputs of the ops run in those modules. A recompute
  /// checkpoints its module, as torch.utils.checkpoint does: the ops inside run again in the
  /// backward, and those whose outputs leave the module keep them, so a chain of recomputes stops
  /// at the module's edge. "m.*" (or "*" for the whole model) is the rule of each module directly
  /// inside m, each a region of its own: "transformer.h.*" checkpoints each of GPT-2's blocks.
  std::map<std::string, ActivationResidence> activations;

  bool empty() const { return parameters.empty() && activations.empty(); }
  /// The residence the rules give `graph` (its parameter table and its ops' module scopes);
  /// entries no rule covers keep the default.
  Residence resolve(const OpGraph& graph) const;
};

/// Assignment of every op to a device of a DeviceSet (by index into DeviceSet::devices), and where
/// the model's tensors live (its residence).
struct Placement {
  std::vector<int> device_of_op;
  Residence residence;

  /// Every op on device `device`.
  static Placement single(const OpGraph& graph, int device);
  /// Expands a per-group device choice to ops.
  static Placement from_groups(const Grouping& grouping, const std::vector<int>& device_of_group);

  /// Throws std::invalid_argument naming the op or parameter at fault: wrong size, an unknown
  /// device, a pinned op on a device of another kind, a residence for another graph (its sizes),
  /// a home outside the device set, or an offload onto the op's own device or no device. (Which
  /// ops may be recomputed depends on the model: the engine refuses the rest, see
  /// PlacedModule::stage.)
  void validate(const OpGraph& graph, const DeviceSet& devices) const;
  /// The device parameter `k` of `graph` lives on under this placement: its residence's home, or
  /// its first reader's device (-1 for a parameter no op reads and no home names).
  int home_of_parameter(const OpGraph& graph, size_t k) const;
  /// The device that reads parameter `k` through a copy of its own (a proxy): the one device all
  /// its readers run on, when that is not its home; -1 otherwise (read at home, or from two or
  /// more devices, each use copied from home).
  int proxy_device_of_parameter(const OpGraph& graph, size_t k) const;
  /// Moves every pinned op that sits on a device of the wrong kind to the first device of its kind.
  /// Returns how many ops moved. Throws std::invalid_argument if no device of that kind exists.
  int enforce_pins(const OpGraph& graph, const DeviceSet& devices);
  /// Number of ops on each device.
  std::vector<int> ops_per_device(size_t num_devices) const;
  /// Stable short identity of the assignment and the residence (16 hex digits); a default
  /// residence adds nothing, so a placement without residence keeps the identity it always had.
  std::string fingerprint() const;
  bool operator==(const Placement& other) const;
  bool operator!=(const Placement& other) const { return !(*this == other); }
};

}  // namespace placement
