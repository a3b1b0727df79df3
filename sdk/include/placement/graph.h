#pragma once
// The operation graph of a model: what every grouper, placer, the simulator and the wire protocol
// see.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "placement/devices.h"

namespace placement {

/// Shape, element type and size of one tensor an op produces.
struct TensorInfo {
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  uint64_t bytes = 0;

  bool operator==(const TensorInfo& other) const;
};

/// Measured cost of one op on one device kind (median of several real runs after warm-up).
struct OpProfile {
  double forward_s = 0.0;
  double backward_s = 0.0;
  /// Optimizer update of the op's parameters (0 for ops without parameters).
  double update_s = 0.0;
  /// Bytes of activations this op keeps alive until its backward pass.
  uint64_t activation_bytes = 0;
  /// Filled in by the simulator's cost model for a device kind nobody profiled the op on (so that
  /// placers and groupers, which read profiles, see every kind); not a measurement.
  bool predicted = false;

  bool operator==(const OpProfile& other) const;
};

/// Which peak rate an op's arithmetic can reach: matrix products (matmul, linear, attention, the
/// GEMMs inside a fused RNN) and convolutions run on tensor cores where the math mode allows,
/// everything else on the vector units. Pooling is told apart because a CPU's pooling kernels
/// compare window elements one at a time, far below the vector rate (DeviceSpec::pool_efficiency).
enum class MathClass { kVector, kMatmul, kConv, kPool };

/// "vector", "matmul", "conv" or "pool".
const char* to_string(MathClass math);
/// Inverse of to_string(MathClass); throws std::invalid_argument on anything else.
MathClass math_class_from_string(const std::string& text);

/// What one op computes in a training step, counted from its real tensors when the graph was
/// captured (placement/op_work.h): the input of the simulator's device cost model, which predicts
/// an op's time on a device nobody profiled it on. The optimizer update is not here: its bytes
/// follow from parameter_bytes and the optimizer.
struct OpWork {
  MathClass math = MathClass::kVector;
  /// Element type the arithmetic runs in ("float32", "bfloat16", ...): picks the peak rate.
  std::string dtype = "float32";
  double forward_flops = 0.0;
  double backward_flops = 0.0;
  /// Bytes read from and written to device memory.
  double forward_bytes = 0.0;
  double backward_bytes = 0.0;
  /// Dispatches on the host, each costing the device's launch time: forward, one per kernel and
  /// at least one per op (a view launches nothing but still goes through the dispatcher);
  /// backward, autograd's node for the op, its kernels and one gradient accumulation per trained
  /// parameter it reads. 0 backward: no gradient.
  int forward_kernels = 1;
  int backward_kernels = 1;
  /// A fused RNN (aten::lstm, gru, rnn_*): the library calls it makes per pass, one per layer and
  /// direction, and the time steps those calls run in all (layers × directions × steps). The
  /// library's own cost per call and per step differs by device (cuDNN launches kernels every
  /// step; oneDNN sets up each call and then loops cheaply): DeviceSpec::rnn_layer_s, rnn_step_s.
  /// 0 for every other op, and in graphs captured before they were counted, whose kernel counts
  /// include the steps.
  int rnn_layers = 0;
  int rnn_steps = 0;
  /// The op's kind has no formula: the figures are a conservative memory-bound guess from its
  /// tensors (every input and output read or written once, twice that backward).
  bool estimated = false;

  bool operator==(const OpWork& other) const;
};

/// One placeable tensor operation.
struct Op {
  /// Dense index: ops[i].id == i.
  int id = 0;
  /// Module scope name, like a TensorFlow name scope: "encoder.layer.3.attention.self.query".
  std::string name;
  /// Operator kind: "aten::conv2d", "aten::addmm", ...
  std::string kind;
  std::vector<TensorInfo> outputs;
  /// Bytes of the parameters and buffers this op owns (they live on the op's device).
  uint64_t parameter_bytes = 0;
  /// Set when the op can only run on one device kind; no placer may move it elsewhere.
  std::optional<DeviceKind> pinned;
  /// Profiles keyed by device kind name ("cpu", "cuda").
  std::map<std::string, OpProfile> profile;
  /// Counted at capture; absent in graphs written before placementd recorded it (re-capture them).
  std::optional<OpWork> work;

  uint64_t output_bytes() const;
  bool operator==(const Op& other) const;
};

/// A trained parameter of the model (one that requires grad), each once: a tied weight is one
/// parameter. What a placement's residence (placement.h) names, by position in
/// OpGraph::parameters.
struct Parameter {
  /// Its name in the module ("transformer.h.0.attn.c_attn.weight"); a tied weight's first name.
  std::string name;
  uint64_t bytes = 0;
  /// The ops that read it, ascending, directly or through a list (an LSTM's weights). The first
  /// counts its bytes in Op::parameter_bytes. Empty for a parameter no op reads.
  std::vector<int> readers;

  bool operator==(const Parameter& other) const;
};

/// A data dependency: op `src` produces `bytes` that op `dst` consumes.
struct Edge {
  int src = 0;
  int dst = 0;
  uint64_t bytes = 0;

  bool operator==(const Edge& other) const;
};

/// A directed acyclic graph of ops. Plain data; validate() checks the invariants the rest relies
/// on.
class OpGraph {
 public:
  std::string name;
  std::vector<Op> ops;
  std::vector<Edge> edges;
  /// The trained parameters, in the module's order. Empty in a graph written by hand or captured
  /// before placementd recorded them: its placements then keep every parameter where its first
  /// reader runs.
  std::vector<Parameter> parameters;

  /// Throws std::invalid_argument naming the op, edge or parameter at fault: ids not dense, an
  /// edge with an unknown end or a self loop, a cycle (with one op on it), or a parameter whose
  /// readers are not ops of the graph in ascending order.
  void validate() const;

  /// Op ids in an order where every producer comes before its consumers. Requires an acyclic graph.
  std::vector<int> topological_order() const;

  /// For each op, the ids of the ops that consume its outputs (in edge order).
  std::vector<std::vector<int>> consumers() const;
  /// For each op, the ids of the ops whose outputs it consumes (in edge order).
  std::vector<std::vector<int>> producers() const;

  /// Stable identity of the model: the same structure (names, kinds, shapes, dtypes, parameter
  /// bytes, edges) gives the same 16-hex-digit string on every run and machine. Profiles and the
  /// graph's display name are left out: they change between runs without changing the model. So
  /// is the parameter table: a capture derives it from the same ops, and leaving it out keeps the
  /// fingerprints (and the placements stored under them) of graphs captured before it.
  std::string fingerprint() const;

  bool operator==(const OpGraph& other) const;
};

}  // namespace placement
