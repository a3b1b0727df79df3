#pragma once
// How much an op computes and moves, from the kinds and shapes of its inputs and outputs: the
// FLOP and byte counts capture() stores as Op::work for the simulator's device cost model
// (docs/simulator.md, "Cost model"). Torch-free: capture describes each input as an OpArgument.

#include <cstdint>
#include <string>
#include <vector>

#include "placement/graph.h"

namespace placement {

/// One input of an op as the cost model sees it: the tensors it carries (one for a tensor, each
/// for a list of tensors) or the scalars it holds (a stride list, a flag, an equation string).
struct OpArgument {
  enum class Type { kNone, kTensor, kTensorList, kInt, kInts, kFloat, kBool, kString, kOther };
  Type type = Type::kNone;
  std::vector<TensorInfo> tensors;
  std::vector<int64_t> ints;
  double number = 0.0;
  bool flag = false;
  std::string text;

  static OpArgument tensor(TensorInfo info);
  static OpArgument tensor_list(std::vector<TensorInfo> infos);
  static OpArgument integer(int64_t value);
  static OpArgument integers(std::vector<int64_t> values);
  static OpArgument boolean(bool value);
  static OpArgument string(std::string value);
};

/// Work of one op of `kind` ("aten::conv2d") in one training step: forward from its inputs and
/// outputs, backward by the op's own gradient formula. Kinds without a formula get a
/// memory-bound guess with `estimated` set (known_op_kind() tells them apart).
OpWork estimate_work(const std::string& kind, const std::vector<OpArgument>& inputs,
                     const std::vector<TensorInfo>& outputs);

/// Adds to each op's backward work the summing of its output's gradients that autograd does when
/// several ops consume the output (a residual connection's input): one add per extra consumer,
/// reading two gradients and writing one. Ops without work are left alone. capture() calls it.
void add_gradient_accumulation(OpGraph& graph);

/// Whether estimate_work() has a formula for `kind`.
bool known_op_kind(const std::string& kind);

/// Bytes of one element of `dtype` ("float32" -> 4); 4 for a name it does not know.
uint64_t dtype_bytes(const std::string& dtype);

}  // namespace placement
