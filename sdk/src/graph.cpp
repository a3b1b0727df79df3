#include "placement/graph.h"

#include <stdexcept>

#include "hash.h"

namespace placement {

bool TensorInfo::operator==(const TensorInfo& o) const {
  return shape == o.shape && dtype == o.dtype && bytes == o.bytes;
}

bool OpProfile::operator==(const OpProfile& o) const {
  return forward_s == o.forward_s && backward_s == o.backward_s && update_s == o.update_s &&
         activation_bytes == o.activation_bytes && predicted == o.predicted;
}

const char* to_string(MathClass math) {
  switch (math) {
    case MathClass::kMatmul:
      return "matmul";
    case MathClass::kConv:
      return "conv";
    case MathClass::kPool:
      return "pool";
    case MathClass::kVector:
      break;
  }
  return "vector";
}

MathClass math_class_from_string(const std::string& text) {
  if (text == "vector") return MathClass::kVector;
  if (text == "matmul") return MathClass::kMatmul;
  if (text == "conv") return MathClass::kConv;
  if (text == "pool") return MathClass::kPool;
  throw std::invalid_argument("unknown math class '" + text + "' (vector, matmul, conv or pool)");
}

bool OpWork::operator==(const OpWork& o) const {
  return math == o.math && dtype == o.dtype && forward_flops == o.forward_flops &&
         backward_flops == o.backward_flops && forward_bytes == o.forward_bytes &&
         backward_bytes == o.backward_bytes && forward_kernels == o.forward_kernels &&
         backward_kernels == o.backward_kernels && rnn_layers == o.rnn_layers &&
         rnn_steps == o.rnn_steps && estimated == o.estimated;
}

uint64_t Op::output_bytes() const {
  uint64_t total = 0;
  for (const TensorInfo& t : outputs) total += t.bytes;
  return total;
}

bool Op::operator==(const Op& o) const {
  return id == o.id && name == o.name && kind == o.kind && outputs == o.outputs &&
         parameter_bytes == o.parameter_bytes && pinned == o.pinned && profile == o.profile &&
         work == o.work;
}

bool Parameter::operator==(const Parameter& o) const {
  return name == o.name && bytes == o.bytes && readers == o.readers;
}

bool Edge::operator==(const Edge& o) const {
  return src == o.src && dst == o.dst && bytes == o.bytes;
}

namespace {

std::string describe(const Op& op) { return "op " + std::to_string(op.id) + " '" + op.name + "'"; }

}  // namespace

void OpGraph::validate() const {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].id != static_cast<int>(i))
      throw std::invalid_argument("op at position " + std::to_string(i) + " has id " +
                                  std::to_string(ops[i].id) + " (ids must be 0..n-1 in order)");
  }
  const int n = static_cast<int>(ops.size());
  for (size_t e = 0; e < edges.size(); ++e) {
    const Edge& edge = edges[e];
    const std::string where = "edge " + std::to_string(e) + " (" + std::to_string(edge.src) +
                              " -> " + std::to_string(edge.dst) + ")";
    if (edge.src < 0 || edge.src >= n)
      throw std::invalid_argument(where + ": source is not an op of this graph (dangling edge)");
    if (edge.dst < 0 || edge.dst >= n)
      throw std::invalid_argument(where +
                                  ": destination is not an op of this graph (dangling edge)");
    if (edge.src == edge.dst) throw std::invalid_argument(where + ": self loop");
  }
  for (size_t k = 0; k < parameters.size(); ++k) {
    const Parameter& p = parameters[k];
    for (size_t i = 0; i < p.readers.size(); ++i)
      if (p.readers[i] < 0 || p.readers[i] >= n || (i > 0 && p.readers[i] <= p.readers[i - 1]))
        throw std::invalid_argument(
            "parameter " + std::to_string(k) + " '" + p.name +
            "': its readers must be ops of this graph in ascending order (" +
            std::to_string(p.readers[i]) + " is not)");
  }
  const auto order = topological_order();
  if (order.size() != ops.size()) {
    // Kahn's order leaves out exactly the ops on or behind a cycle; name the first of them.
    std::vector<bool> done(ops.size(), false);
    for (int id : order) done[id] = true;
    for (const Op& op : ops)
      if (!done[op.id]) throw std::invalid_argument("graph has a cycle through " + describe(op));
  }
}

std::vector<int> OpGraph::topological_order() const {
  const size_t n = ops.size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> out(n);
  for (const Edge& edge : edges) {
    if (edge.src < 0 || edge.dst < 0 || static_cast<size_t>(edge.src) >= n ||
        static_cast<size_t>(edge.dst) >= n)
      continue;
    out[edge.src].push_back(edge.dst);
    ++indegree[edge.dst];
  }
  std::vector<int> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) order.push_back(static_cast<int>(i));
  for (size_t head = 0; head < order.size(); ++head)
    for (int next : out[order[head]])
      if (--indegree[next] == 0) order.push_back(next);
  return order;
}

std::vector<std::vector<int>> OpGraph::consumers() const {
  std::vector<std::vector<int>> result(ops.size());
  for (const Edge& edge : edges) result.at(edge.src).push_back(edge.dst);
  return result;
}

std::vector<std::vector<int>> OpGraph::producers() const {
  std::vector<std::vector<int>> result(ops.size());
  for (const Edge& edge : edges) result.at(edge.dst).push_back(edge.src);
  return result;
}

std::string OpGraph::fingerprint() const {
  detail::Fnv1a h;
  h.add(static_cast<uint64_t>(ops.size()));
  for (const Op& op : ops) {
    h.add(op.name).add(op.kind).add(op.parameter_bytes);
    h.add(op.pinned ? to_string(*op.pinned) : "-");
    h.add(static_cast<uint64_t>(op.outputs.size()));
    for (const TensorInfo& t : op.outputs) {
      h.add(t.dtype).add(t.bytes).add(static_cast<uint64_t>(t.shape.size()));
      for (int64_t d : t.shape) h.add(d);
    }
  }
  h.add(static_cast<uint64_t>(edges.size()));
  for (const Edge& edge : edges) h.add(edge.src).add(edge.dst).add(edge.bytes);
  return h.hex();
}

bool OpGraph::operator==(const OpGraph& o) const {
  return name == o.name && ops == o.ops && edges == o.edges && parameters == o.parameters;
}

}  // namespace placement
