#include "test_graphs.h"

#include <string>

namespace placement::testing {

namespace {

int add_op(OpGraph& g, const std::string& name, const std::string& kind, uint64_t bytes) {
  Op op;
  op.id = static_cast<int>(g.ops.size());
  op.name = name;
  op.kind = kind;
  op.outputs.push_back({{static_cast<int64_t>(bytes / 4)}, "float32", bytes});
  g.ops.push_back(op);
  return op.id;
}

}  // namespace

OpGraph unrolled_stack(int ops, int layers) {
  OpGraph g;
  g.name = "unrolled-" + std::to_string(layers) + "-layer";
  const int steps = ops / layers;
  const uint64_t bytes = 128 * 1024 * 4;
  g.ops.reserve(static_cast<size_t>(steps) * layers);
  g.edges.reserve(2 * static_cast<size_t>(steps) * layers);
  for (int t = 0; t < steps; ++t)
    for (int l = 0; l < layers; ++l) {
      Op op;
      op.id = static_cast<int>(g.ops.size());
      op.name = "layer." + std::to_string(l) + ".step." + std::to_string(t);
      op.kind = "aten::lstm_cell";
      op.outputs.push_back({{128, 1024}, "float32", bytes});
      // The cell's weights belong to its first step; later steps reuse them.
      op.parameter_bytes = t == 0 ? 32u << 20 : 0;
      op.profile["cuda"] = {20e-6, 40e-6, t == 0 ? 50e-6 : 0.0, 512 * 1024};
      op.profile["cpu"] = {2e-4, 4e-4, t == 0 ? 5e-4 : 0.0, 512 * 1024};
      if (t > 0) g.edges.push_back({op.id - layers, op.id, bytes});
      if (l > 0) g.edges.push_back({op.id - 1, op.id, bytes});
      g.ops.push_back(std::move(op));
    }
  return g;
}

OpGraph chain(int n, uint64_t bytes) {
  OpGraph g;
  g.name = "chain" + std::to_string(n);
  for (int i = 0; i < n; ++i) {
    add_op(g, "layer." + std::to_string(i), "aten::linear", bytes);
    if (i > 0) g.edges.push_back({i - 1, i, bytes});
  }
  return g;
}

OpGraph two_chains(int length) {
  OpGraph g;
  g.name = "two_chains";
  int last[2] = {-1, -1};
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < length; ++i) {
      const int id = add_op(g, "tower" + std::to_string(c) + ".layer." + std::to_string(i),
                            "aten::linear", 4096);
      if (last[c] >= 0) g.edges.push_back({last[c], id, 4096});
      last[c] = id;
    }
  }
  const int join = add_op(g, "join", "aten::add", 4096);
  g.edges.push_back({last[0], join, 4096});
  g.edges.push_back({last[1], join, 4096});
  return g;
}

void profile_all(OpGraph& graph, DeviceKind kind, double forward_s) {
  for (Op& op : graph.ops)
    op.profile[to_string(kind)] = {forward_s, 2 * forward_s, 0.0, op.output_bytes()};
}

DeviceSet devices(int count, DeviceKind kind, uint64_t memory) {
  std::vector<Device> list;
  for (int i = 0; i < count; ++i) list.push_back({kind, i, memory, 1.0});
  return DeviceSet::uniform(list, 10e9, 1e-5);
}

void give_work(OpGraph& graph, double forward_flops, double bytes, uint64_t parameter_bytes) {
  for (Op& op : graph.ops) {
    OpWork w;
    w.math = MathClass::kMatmul;
    w.forward_flops = forward_flops;
    w.backward_flops = 2 * forward_flops;
    w.forward_bytes = w.backward_bytes = bytes;
    op.work = w;
    op.parameter_bytes = parameter_bytes;
  }
}

}  // namespace placement::testing
