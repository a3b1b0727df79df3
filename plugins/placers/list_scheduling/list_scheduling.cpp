#include "list_scheduling.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace placement::plugins {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Forward + backward time of `op` on `device`; without a profile for that kind the op cannot be
// judged there (infinite), unless the op has no profile at all (then every device costs the same).
double op_time(const Op& op, const Device& device) {
  if (op.profile.empty()) return 1e-6;
  auto it = op.profile.find(to_string(device.kind));
  if (it == op.profile.end()) return kInfinity;
  return (it->second.forward_s + it->second.backward_s + it->second.update_s) / device.speed;
}

}  // namespace

void ListSchedulingPlacer::prepare(const OpGraph& graph, const Grouping& grouping,
                                   const DeviceSet& devices, std::mt19937_64&) {
  const size_t D = devices.size();
  if (D == 0) throw std::invalid_argument("list_scheduling: the device set is empty");
  const auto members = grouping.members();
  const auto producers = graph.producers();

  // Memory each group needs and compute time on each device. The memory is counted as the
  // simulator checks it: parameters with gradients and optimizer state, the activations kept for
  // backward, the copies of tensors received from other devices, and the largest single output as
  // a working buffer, so that a placement this placer calls fitting is one the memory check passes.
  const size_t G = members.size();
  std::vector<double> need(G, 0.0), largest_output(G, 0.0);
  std::vector<std::vector<double>> work(G, std::vector<double>(D, 0.0));
  for (size_t g = 0; g < G; ++g)
    for (int op : members[g]) {
      const Op& o = graph.ops[op];
      uint64_t kept = o.output_bytes();
      for (const auto& [kind, p] : o.profile) kept = std::max<uint64_t>(kept, p.activation_bytes);
      need[g] += static_cast<double>(o.parameter_bytes) * (2.0 + optimizer_state_factor_) +
                 static_cast<double>(kept);
      largest_output[g] = std::max(largest_output[g], static_cast<double>(o.output_bytes()));
      for (size_t d = 0; d < D; ++d) work[g][d] += op_time(o, devices.devices[d]);
    }
  std::vector<double> capacity(D), used(D, 0.0), buffer(D, 0.0);
  for (size_t d = 0; d < D; ++d)
    capacity[d] = static_cast<double>(devices.devices[d].memory_bytes) * (1.0 - headroom_);

  // Tensors flowing into each group from other groups: source group, producing op, bytes.
  struct Input {
    int group, op;
    double bytes;
  };
  std::vector<std::vector<Input>> inputs(G);
  for (const Edge& e : graph.edges) {
    const int from = grouping.group_of_op[e.src], to = grouping.group_of_op[e.dst];
    if (from != to) inputs[to].push_back({from, e.src, static_cast<double>(e.bytes)});
  }
  // A received tensor is kept once per (producing op, device), as autograd keeps it.
  std::set<std::pair<int, size_t>> received;
  auto receives = [&](size_t g, size_t d) {
    double bytes = 0.0;
    std::set<int> counted;
    for (const Input& in : inputs[g])
      if (device_of_group_[in.group] >= 0 && static_cast<size_t>(device_of_group_[in.group]) != d &&
          !received.count({in.op, d}) && counted.insert(in.op).second)
        bytes += in.bytes;
    return bytes;
  };

  device_of_group_.assign(G, -1);
  std::vector<double> finish(G, 0.0), device_free(D, 0.0);
  for (int op : graph.topological_order()) {
    const int g = grouping.group_of_op[op];
    if (device_of_group_[g] >= 0) continue;
    int best = -1;
    double best_finish = kInfinity;
    for (size_t d = 0; d < D; ++d) {
      if (work[g][d] == kInfinity) continue;
      if (used[d] + need[g] + receives(g, d) + std::max(buffer[d], largest_output[g]) > capacity[d])
        continue;
      double ready = 0.0;
      for (const Input& in : inputs[g]) {
        if (device_of_group_[in.group] < 0)
          continue;  // a cycle between groups: that input comes later
        const size_t from = static_cast<size_t>(device_of_group_[in.group]);
        const double link =
            from == d ? 0.0 : devices.latency[from][d] + in.bytes / devices.bandwidth[from][d];
        ready = std::max(ready, finish[in.group] + link);
      }
      const double done = std::max(ready, device_free[d]) + work[g][d];
      if (done < best_finish) {
        best_finish = done;
        best = static_cast<int>(d);
      }
    }
    if (best < 0) {
      // Fits nowhere: take the device with the most memory left; the daemon's memory check then
      // rejects the placement with the device and bytes named, instead of the placer guessing.
      size_t roomiest = 0;
      for (size_t d = 1; d < D; ++d)
        if (capacity[d] - used[d] > capacity[roomiest] - used[roomiest]) roomiest = d;
      best = static_cast<int>(roomiest);
      best_finish = device_free[best] + (work[g][best] == kInfinity ? 0.0 : work[g][best]);
    }
    const size_t at = static_cast<size_t>(best);
    used[at] += need[g] + receives(g, at);
    for (const Input& in : inputs[g])
      if (device_of_group_[in.group] >= 0 && static_cast<size_t>(device_of_group_[in.group]) != at)
        received.insert({in.op, at});
    buffer[at] = std::max(buffer[at], largest_output[g]);
    device_of_group_[g] = best;
    finish[g] = best_finish;
    device_free[best] = best_finish;
  }
  for (int& d : device_of_group_)
    if (d < 0) d = 0;  // groups without ops
}

}  // namespace placement::plugins
