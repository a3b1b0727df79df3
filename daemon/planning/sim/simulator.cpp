#include "planning/sim/simulator.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace placementd::sim {

using placement::DeviceKind;
using placement::OpGraph;
using placement::Placement;

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

// CSR adjacency over edge indices.
void build_csr(size_t n, const std::vector<placement::Edge>& edges, bool incoming, std::vector<int>& begin,
               std::vector<int>& list) {
  begin.assign(n + 1, 0);
  for (const auto& e : edges) ++begin[(incoming ? e.dst : e.src) + 1];
  for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
  list.assign(edges.size(), 0);
  std::vector<int> fill(begin.begin(), begin.end() - 1);
  for (size_t i = 0; i < edges.size(); ++i) list[fill[incoming ? edges[i].dst : edges[i].src]++] = static_cast<int>(i);
}

}  // namespace

Simulator::Simulator(OpGraph graph, placement::DeviceSet devices, SimulatorOptions options)
    : graph_(std::move(graph)), devices_(std::move(devices)), options_(options) {
  graph_.validate();
  devices_.validate();
  order_ = graph_.topological_order();
  const size_t n = graph_.ops.size(), D = devices_.size();
  build_csr(n, graph_.edges, true, in_begin_, in_edges_);
  build_csr(n, graph_.edges, false, out_begin_, out_edges_);
  costs_.resize(n * D);
  activation_bytes_.assign(n, 0);
  for (size_t u = 0; u < n; ++u) {
    const auto& op = graph_.ops[u];
    uint64_t activation = 0;
    for (const auto& [kind_name, p] : op.profile) {
      placement::device_kind_from_string(kind_name);  // rejects a kind we do not know
      activation = std::max(activation, p.activation_bytes);
    }
    // A predicted profile's activation bytes are the op's outputs, as without a profile.
    // Without a profile, what the op produces is what autograd would keep.
    activation_bytes_[u] = op.profile.empty() ? op.output_bytes() : activation;
    for (size_t d = 0; d < D; ++d) costs_[u * D + d] = time_on(op, devices_.devices[d]);
  }
  add_predicted_profiles();
}

void Simulator::add_predicted_profiles() {
  const size_t D = devices_.size();
  for (size_t d = 0; d < D; ++d) {
    const placement::Device& device = devices_.devices[d];
    if (!device.spec) continue;
    const std::string kind = to_string(device.kind);
    for (size_t u = 0; u < graph_.ops.size(); ++u) {
      placement::Op& op = graph_.ops[u];
      const Cost& c = costs_[u * D + d];
      if (!c.predicted || op.profile.count(kind)) continue;  // measured, or an earlier device of the kind
      op.profile[kind] = {c.forward * device.speed, c.backward * device.speed, c.update * device.speed,
                          activation_bytes_[u], true};
    }
  }
}

Simulator::Cost Simulator::time_on(const placement::Op& op, const placement::Device& device) const {
  const auto it = op.profile.find(to_string(device.kind));
  auto from_profile = [&](bool predicted) {
    const placement::OpProfile& p = it->second;
    return Cost{p.forward_s / device.speed, p.backward_s / device.speed, p.update_s / device.speed, predicted};
  };
  if (it != op.profile.end() && !it->second.predicted) return from_profile(false);
  if (op.work && device.spec) {
    const PredictedTime t = predict_op_time(*op.work, *device.spec, options_.math);
    return {t.forward_s, t.backward_s,
            predict_update_time(op.parameter_bytes, options_.optimizer_state_factor, *device.spec), true};
  }
  // A prediction made for another device of this kind (a graph from another simulator's graph()).
  if (it != op.profile.end()) return from_profile(true);
  // An op nobody profiled and capture did not count (graph inputs of hand-written graphs) costs
  // nothing anywhere rather than being unplaceable: its data still moves over the links.
  if (op.profile.empty() && !op.work) return {0, 0, 0, false};
  return {};
}

const Simulator::Cost& Simulator::cost(int op, int device) const {
  const Cost& c = costs_[static_cast<size_t>(op) * devices_.size() + device];
  if (c.forward < 0) throw std::invalid_argument(why_untimeable(op, device));
  return c;
}

std::string Simulator::why_untimeable(int op, int device) const {
  const placement::Op& o = graph_.ops[op];
  const placement::Device& d = devices_.devices[device];
  const std::string what = "op " + std::to_string(op) + " '" + o.name + "' cannot be timed on " + d.name() + ": ";
  const std::string kind = to_string(d.kind);
  if (!o.work)
    return what + "it has no " + kind + " profile and the graph has no op work to predict one "
                  "from (the file predates it: re-capture the model with placementctl-capture)";
  return what + "it has no " + kind + " profile and " + d.name() +
         " has no spec to predict one from (give the device spec = \"<preset>\" or its "
         "figures in the topology, or profile the graph on a " + kind + " device)";
}

uint64_t Simulator::capacity(size_t device) const {
  return static_cast<uint64_t>(static_cast<double>(devices_.devices[device].memory_bytes) *
                               (1.0 - options_.memory_headroom_fraction));
}

uint64_t Simulator::parameter_state_bytes(size_t op) const {
  // Value, gradient and the optimizer's states.
  return static_cast<uint64_t>(static_cast<double>(graph_.ops[op].parameter_bytes) *
                               (2.0 + options_.optimizer_state_factor));
}

Simulator::MemoryFloor Simulator::memory_floor() const {
  MemoryFloor floor;
  for (size_t u = 0; u < graph_.ops.size(); ++u) floor.bytes += parameter_state_bytes(u) + activation_bytes_[u];
  uint64_t largest = 0, total = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    largest = std::max(largest, capacity(d));
    total += capacity(d);
  }
  floor.fits_one_device = floor.bytes <= largest;
  floor.fits_all_devices = floor.bytes <= total;
  return floor;
}

std::pair<size_t, std::string> Simulator::untimeable_ops(int device) const {
  std::pair<size_t, std::string> out{0, ""};
  for (size_t u = 0; u < graph_.ops.size(); ++u) {
    if (costs_[u * devices_.size() + device].forward >= 0) continue;
    if (out.first++ == 0) out.second = why_untimeable(static_cast<int>(u), device);
  }
  return out;
}

size_t Simulator::predicted_op_count(int device) const {
  size_t count = 0;
  for (size_t u = 0; u < graph_.ops.size(); ++u) count += costs_[u * devices_.size() + device].predicted;
  return count;
}

void Simulator::fill_memory(const Placement& placement, SimulationResult& result) const {
  const size_t D = devices_.size();
  result.memory.assign(D, {});
  for (size_t d = 0; d < D; ++d) result.memory[d].capacity = capacity(d);
  for (size_t u = 0; u < graph_.ops.size(); ++u) {
    MemoryUse& m = result.memory[placement.device_of_op[u]];
    m.parameters += parameter_state_bytes(u);
    m.activations += activation_bytes_[u];
    m.transient = std::max(m.transient, graph_.ops[u].output_bytes());
  }
  // Autograd keeps the copy of a tensor received from another device until backward; one per
  // (producer, destination device).
  std::vector<int> received(graph_.ops.size() * D, 0);
  for (const auto& e : graph_.edges) {
    const int from = placement.device_of_op[e.src], to = placement.device_of_op[e.dst];
    if (from == to || received[e.src * D + to]++) continue;
    result.memory[to].activations += e.bytes;
  }
  for (size_t d = 0; d < D && result.valid; ++d) {
    const MemoryUse& m = result.memory[d];
    if (m.peak() > m.capacity) {
      result.valid = false;
      result.invalid_reason = "out of memory on " + devices_.devices[d].name() + ": needs " + gib(m.peak()) +
                              " (parameters, gradients and optimizer state " + gib(m.parameters) + ", activations " +
                              gib(m.activations) + ", largest output " + gib(m.transient) + "), has " + gib(m.capacity);
    }
  }
}

SimulationResult Simulator::check_memory(const Placement& placement) const {
  placement.validate(graph_, devices_);
  SimulationResult result;
  fill_memory(placement, result);
  return result;
}

SimulationResult Simulator::simulate(const Placement& placement) const {
  placement.validate(graph_, devices_);
  const size_t n = graph_.ops.size(), D = devices_.size();
  const std::vector<int>& dev = placement.device_of_op;
  SimulationResult result;
  result.busy_s.assign(D, 0.0);
  fill_memory(placement, result);

  std::vector<Cost> costs(n);
  for (size_t u = 0; u < n; ++u) {
    costs[u] = cost(static_cast<int>(u), dev[u]);
    result.predicted_ops += costs[u].predicted;
  }

  // Execution resources: each GPU is its own; CPU devices may share the host.
  std::vector<size_t> resource(D);
  for (size_t d = 0, host = D; d < D; ++d) {
    resource[d] = d;
    if (options_.cpu_devices_share_host && devices_.devices[d].kind == DeviceKind::kCpu) {
      if (host == D) host = d;
      resource[d] = host;
    }
  }
  std::vector<double> device_free(D, 0.0), link_free(D * D, 0.0);
  // When a tensor reaches a device over a link; it is sent once per (producer, destination).
  std::vector<double> arrival(n * D, -1.0);
  auto transfer = [&](int from, int to, double ready, uint64_t bytes) {
    double& link = link_free[from * D + to];
    const double start = std::max(ready, link);
    link = start + devices_.latency[from][to] + static_cast<double>(bytes) / devices_.bandwidth[from][to];
    result.transferred_bytes += bytes;
    ++result.transfers;
    return link;
  };

  // Forward, in topological order.
  std::vector<double> forward_end(n, 0.0);
  double forward_done = 0.0;
  for (int v : order_) {
    double ready = 0.0;
    for (int i = in_begin_[v]; i < in_begin_[v + 1]; ++i) {
      const auto& e = graph_.edges[in_edges_[i]];
      if (dev[e.src] == dev[v]) {
        ready = std::max(ready, forward_end[e.src]);
        continue;
      }
      double& when = arrival[e.src * D + dev[v]];
      if (when < 0) when = transfer(dev[e.src], dev[v], forward_end[e.src], e.bytes);
      ready = std::max(ready, when);
    }
    double& free = device_free[resource[dev[v]]];
    const double start = std::max(ready, free);
    forward_end[v] = free = start + costs[v].forward;
    result.busy_s[dev[v]] += costs[v].forward;
    forward_done = std::max(forward_done, forward_end[v]);
  }
  result.forward_s = forward_done;

  // Backward starts at the loss, once the forward pass is complete; an op's backward needs the
  // gradients of all its consumers (sent back over the links when they live elsewhere).
  std::vector<double> backward_end(n, 0.0);
  std::fill(device_free.begin(), device_free.end(), forward_done);
  double backward_done = forward_done;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int u = *it;
    double ready = forward_done;
    for (int i = out_begin_[u]; i < out_begin_[u + 1]; ++i) {
      const auto& e = graph_.edges[out_edges_[i]];
      ready = std::max(ready, dev[e.dst] == dev[u] ? backward_end[e.dst] : transfer(dev[e.dst], dev[u], backward_end[e.dst], e.bytes));
    }
    double& free = device_free[resource[dev[u]]];
    const double start = std::max(ready, free);
    backward_end[u] = free = start + costs[u].backward;
    result.busy_s[dev[u]] += costs[u].backward;
    backward_done = std::max(backward_done, backward_end[u]);
  }
  result.backward_s = backward_done;

  // optimizer.step() runs after loss.backward() returns; devices update their own parameters.
  std::vector<double> update(D, 0.0);
  for (size_t u = 0; u < n; ++u) update[resource[dev[u]]] += std::max(costs[u].update, 0.0);
  double step = backward_done;
  for (size_t d = 0; d < D; ++d) {
    result.busy_s[d] += update[d];
    step = std::max(step, backward_done + update[d]);
  }
  result.step_time_s = step;
  return result;
}

double Simulator::lower_bound_s() const {
  const size_t n = graph_.ops.size(), D = devices_.size();
  std::vector<double> best(n, -1.0), best_update(n, 0.0);
  for (size_t u = 0; u < n; ++u) {
    for (size_t d = 0; d < D; ++d) {
      const Cost& c = costs_[u * D + d];
      if (c.forward < 0) continue;
      const double t = c.forward + c.backward;
      if (best[u] < 0 || t < best[u]) {
        best[u] = t;
        best_update[u] = std::max(c.update, 0.0);
      }
    }
    if (best[u] < 0) best[u] = 0.0;  // cannot be timed anywhere: contributes nothing we can bound
  }
  // A chain's forward and backward times add up along every path.
  std::vector<double> path(n, 0.0);
  double critical = 0.0, work = 0.0;
  for (int v : order_) {
    double longest = 0.0;
    for (int i = in_begin_[v]; i < in_begin_[v + 1]; ++i) longest = std::max(longest, path[graph_.edges[in_edges_[i]].src]);
    path[v] = longest + best[v];
    critical = std::max(critical, path[v]);
    work += best[v] + best_update[v];
  }
  return std::max(critical, work / static_cast<double>(D));
}

}  // namespace placementd::sim
