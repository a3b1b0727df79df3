#include "planning/sim/simulator.h"

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

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

// CSR adjacency: the edges themselves, grouped by the op they enter (or leave), in the graph's
// order within each op (simulate() reads them in its inner loops: no indirection).
void build_csr(size_t n, const std::vector<placement::Edge>& edges, bool incoming,
               std::vector<int>& begin, std::vector<placement::Edge>& list) {
  begin.assign(n + 1, 0);
  for (const auto& e : edges) ++begin[(incoming ? e.dst : e.src) + 1];
  for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
  list.assign(edges.size(), {});
  std::vector<int> fill(begin.begin(), begin.end() - 1);
  for (const auto& e : edges) list[fill[incoming ? e.dst : e.src]++] = e;
}

// A stamp per slot instead of clearing a table on every simulate(): a slot is set in this call
// when its stamp is the call's. Per thread, shared by every Simulator on it (sized to the largest).
struct Stamps {
  std::vector<uint32_t> stamp;
  uint32_t now = 0;
  // Starts a call over `size` slots, none set.
  void begin(size_t size) {
    if (stamp.size() < size) stamp.resize(size, 0);
    if (++now == 0) {  // wrapped: old stamps could match again
      std::fill(stamp.begin(), stamp.end(), 0);
      now = 1;
    }
  }
  bool set(size_t slot) const { return stamp[slot] == now; }
  void mark(size_t slot) { stamp[slot] = now; }
};

}  // namespace

std::vector<size_t> execution_resources(const SimulatorOptions& options,
                                        const placement::DeviceSet& devices) {
  // Each GPU is its own unless the options group it with others; CPU devices may share the host.
  const size_t D = devices.size();
  std::vector<size_t> resource(D);
  for (size_t d = 0, host = D; d < D; ++d) {
    resource[d] = d < options.shared_with.size() && options.shared_with[d] < d
                      ? resource[options.shared_with[d]]
                      : d;
    if (options.cpu_devices_share_host && devices.devices[d].kind == DeviceKind::kCpu) {
      if (host == D) host = d;
      resource[d] = host;
    }
  }
  return resource;
}

Simulator::Simulator(OpGraph graph, placement::DeviceSet devices, SimulatorOptions options)
    : graph_(std::move(graph)), devices_(std::move(devices)), options_(options) {
  graph_.validate();
  devices_.validate();
  const auto& r = options_.replicas;
  if (r.count < 1)
    throw std::invalid_argument("replicas: " + std::to_string(r.count) +
                                " is not a count of nodes");
  if (r.count > 1 && !(r.link.bandwidth > 0))
    throw std::invalid_argument(
        "replicas: " + std::to_string(r.count) +
        " nodes need the link between them ([[link]] between = [\"node\", \"node\"])");
  if (r.bucket_bytes == 0)
    throw std::invalid_argument("replicas: the bucket size must be above 0 bytes");
  order_ = graph_.topological_order();
  const size_t n = graph_.ops.size(), D = devices_.size();
  build_csr(n, graph_.edges, true, in_begin_, in_edges_);
  build_csr(n, graph_.edges, false, out_begin_, out_edges_);
  resource_ = execution_resources(options_, devices_);
  for (const auto& d : devices_.devices) device_kind_.push_back(static_cast<int>(d.kind));
  pinned_kind_.assign(n, -1);
  for (size_t u = 0; u < n; ++u)
    if (graph_.ops[u].pinned) pinned_kind_[u] = static_cast<int>(*graph_.ops[u].pinned);
  costs_.resize(n * D);
  activation_bytes_.assign(n, 0);
  state_bytes_.resize(n);
  output_bytes_.resize(n);
  for (size_t u = 0; u < n; ++u) {
    const auto& op = graph_.ops[u];
    // Value, gradient and the optimizer's states.
    state_bytes_[u] = static_cast<uint64_t>(static_cast<double>(op.parameter_bytes) *
                                            (2.0 + options_.optimizer_state_factor));
    output_bytes_[u] = op.output_bytes();
    uint64_t activation = 0;
    for (const auto& [kind_name, p] : op.profile) {
      placement::device_kind_from_string(kind_name);  // rejects a kind we do not know
      activation = std::max(activation, p.activation_bytes);
    }
    // A predicted profile's activation bytes are the op's outputs, as without a profile.
    // Without a profile, what the op produces is what autograd would keep.
    activation_bytes_[u] = op.profile.empty() ? output_bytes_[u] : activation;
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
      if (!c.predicted || op.profile.count(kind))
        continue;  // measured, or an earlier device of the kind
      op.profile[kind] = {c.forward * device.speed, c.backward * device.speed,
                          c.update * device.speed, activation_bytes_[u], true};
    }
  }
}

Simulator::Cost Simulator::time_on(const placement::Op& op, const placement::Device& device) const {
  const auto it = op.profile.find(to_string(device.kind));
  auto from_profile = [&](bool predicted) {
    const placement::OpProfile& p = it->second;
    return Cost{p.forward_s / device.speed, p.backward_s / device.speed, p.update_s / device.speed,
                predicted};
  };
  if (it != op.profile.end() && !it->second.predicted) return from_profile(false);
  if (op.work && device.spec) {
    const PredictedTime t = predict_op_time(*op.work, *device.spec, options_.math);
    return {t.forward_s, t.backward_s,
            predict_update_time(op.parameter_bytes, options_.optimizer_state_factor, *device.spec),
            true};
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
  const std::string what =
      "op " + std::to_string(op) + " '" + o.name + "' cannot be timed on " + d.name() + ": ";
  const std::string kind = to_string(d.kind);
  if (!o.work)
    return what + "it has no " + kind +
           " profile and the graph has no op work to predict one "
           "from (the file predates it: re-capture the model with placementctl-capture)";
  return what + "it has no " + kind + " profile and " + d.name() +
         " has no spec to predict one from (give the device spec = \"<preset>\" or its "
         "figures in the topology, or profile the graph on a " +
         kind + " device)";
}

uint64_t Simulator::capacity(size_t device) const {
  return static_cast<uint64_t>(static_cast<double>(devices_.devices[device].memory_bytes) *
                               (1.0 - options_.memory_headroom_fraction));
}

uint64_t Simulator::parameter_state_bytes(size_t op) const { return state_bytes_[op]; }

bool Simulator::holds_alone(size_t op, size_t device) const {
  return parameter_state_bytes(op) + activation_bytes_[op] + output_bytes_[op] <= capacity(device);
}

Simulator::MemoryFloor Simulator::memory_floor() const {
  MemoryFloor floor;
  for (size_t u = 0; u < graph_.ops.size(); ++u)
    floor.bytes += parameter_state_bytes(u) + activation_bytes_[u];
  uint64_t largest = 0, total = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    largest = std::max(largest, capacity(d));
    total += capacity(d);
  }
  floor.fits_one_device = floor.bytes <= largest;
  floor.all_devices_bytes = total;
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
  for (size_t u = 0; u < graph_.ops.size(); ++u)
    count += costs_[u * devices_.size() + device].predicted;
  return count;
}

void Simulator::fill_memory(const Placement& placement, SimulationResult& result) const {
  const size_t D = devices_.size();
  result.memory.assign(D, {});
  for (size_t d = 0; d < D; ++d) result.memory[d].capacity = capacity(d);
  for (size_t u = 0; u < graph_.ops.size(); ++u) {
    MemoryUse& m = result.memory[placement.device_of_op[u]];
    m.parameters += state_bytes_[u];
    m.activations += activation_bytes_[u];
    m.transient = std::max(m.transient, output_bytes_[u]);
  }
  // Autograd keeps the copy of a tensor received from another device until backward; one per
  // (producer, destination device).
  thread_local Stamps received;
  received.begin(graph_.ops.size() * D);
  for (const auto& e : graph_.edges) {
    const int from = placement.device_of_op[e.src], to = placement.device_of_op[e.dst];
    const size_t slot = static_cast<size_t>(e.src) * D + static_cast<size_t>(to);
    if (from == to || received.set(slot)) continue;
    received.mark(slot);
    result.memory[to].activations += e.bytes;
  }
  for (size_t d = 0; d < D && result.valid; ++d) {
    const MemoryUse& m = result.memory[d];
    if (m.peak() > m.capacity) {
      result.valid = false;
      result.invalid_reason = "out of memory on " + devices_.devices[d].name() + ": needs " +
                              gib(m.peak()) + " (parameters, gradients and optimizer state " +
                              gib(m.parameters) + ", activations " + gib(m.activations) +
                              ", largest output " + gib(m.transient) + "), has " + gib(m.capacity);
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
  return schedule(placement, true);
}

double Simulator::step_time_s(const Placement& placement) const {
  return schedule(placement, false).step_time_s;
}

SimulationResult Simulator::schedule(const Placement& placement, bool check_memory) const {
  const size_t n = graph_.ops.size(), D = devices_.size();
  const std::vector<int>& dev = placement.device_of_op;
  if (dev.size() != n) placement.validate(graph_, devices_);  // throws, naming the sizes
  SimulationResult result;
  // What Placement::validate checks, and whether each op can be timed where it is, in one pass
  // over compact arrays; on a failure, validate() names the first op outside the devices or off
  // its pinned kind before an untimeable op is blamed, as if it had run first.
  for (size_t u = 0; u < n; ++u) {
    const int d = dev[u];
    if (d < 0 || static_cast<size_t>(d) >= D ||
        (pinned_kind_[u] >= 0 && pinned_kind_[u] != device_kind_[static_cast<size_t>(d)]))
      placement.validate(graph_, devices_);
    const Cost& c = costs_[u * D + static_cast<size_t>(d)];
    if (c.forward < 0) {
      placement.validate(graph_, devices_);
      throw std::invalid_argument(why_untimeable(static_cast<int>(u), d));
    }
    result.predicted_ops += c.predicted;
  }
  result.busy_s.assign(D, 0.0);
  if (check_memory) fill_memory(placement, result);

  // Checked above: read without the check.
  const auto cost_of = [&](size_t u) -> const Cost& {
    return costs_[u * D + static_cast<size_t>(dev[u])];
  };
  // The per-op and per-link times of the schedule, reused by the thread's next call: a search
  // simulates hundreds of thousands of placements, and their allocations were a tenth of it.
  thread_local Scratch scratch;
  thread_local Stamps arrived;

  const std::vector<size_t>& resource = resource_;
  std::vector<double>& device_free = scratch.device_free;
  std::vector<double>& link_free = scratch.link_free;
  device_free.assign(D, 0.0);
  link_free.assign(D * D, 0.0);
  // When a tensor reaches a device over a link; it is sent once per (producer, destination).
  std::vector<double>& arrival = scratch.arrival;
  if (arrival.size() < n * D) arrival.resize(n * D);
  arrived.begin(n * D);
  auto transfer = [&](int from, int to, double ready, uint64_t bytes) {
    double& link = link_free[from * D + to];
    const double start = std::max(ready, link);
    link = start + devices_.latency[from][to] +
           static_cast<double>(bytes) / devices_.bandwidth[from][to];
    result.transferred_bytes += bytes;
    ++result.transfers;
    return link;
  };

  // Forward, in topological order.
  std::vector<double>& forward_end = scratch.forward_end;
  forward_end.assign(n, 0.0);
  double forward_done = 0.0;
  for (int v : order_) {
    double ready = 0.0;
    for (int i = in_begin_[v]; i < in_begin_[v + 1]; ++i) {
      const auto& e = in_edges_[i];
      if (dev[e.src] == dev[v]) {
        ready = std::max(ready, forward_end[e.src]);
        continue;
      }
      const size_t slot = static_cast<size_t>(e.src) * D + static_cast<size_t>(dev[v]);
      double& when = arrival[slot];
      if (!arrived.set(slot)) {
        arrived.mark(slot);
        when = transfer(dev[e.src], dev[v], forward_end[e.src], e.bytes);
      }
      ready = std::max(ready, when);
    }
    double& free = device_free[resource[dev[v]]];
    const double start = std::max(ready, free);
    const double forward = cost_of(static_cast<size_t>(v)).forward;
    forward_end[v] = free = start + forward;
    result.busy_s[dev[v]] += forward;
    forward_done = std::max(forward_done, forward_end[v]);
  }
  result.forward_s = forward_done;

  // Backward starts at the loss, once the forward pass is complete; an op's backward needs the
  // gradients of all its consumers (sent back over the links when they live elsewhere).
  std::vector<double>& backward_end = scratch.backward_end;
  backward_end.assign(n, 0.0);
  std::fill(device_free.begin(), device_free.end(), forward_done);
  double backward_done = forward_done;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int u = *it;
    double ready = forward_done;
    for (int i = out_begin_[u]; i < out_begin_[u + 1]; ++i) {
      const auto& e = out_edges_[i];
      ready = std::max(ready, dev[e.dst] == dev[u]
                                  ? backward_end[e.dst]
                                  : transfer(dev[e.dst], dev[u], backward_end[e.dst], e.bytes));
    }
    double& free = device_free[resource[dev[u]]];
    const double start = std::max(ready, free);
    const double backward = cost_of(static_cast<size_t>(u)).backward;
    backward_end[u] = free = start + backward;
    result.busy_s[dev[u]] += backward;
    backward_done = std::max(backward_done, backward_end[u]);
  }
  result.backward_s = backward_done;

  // Replicas average their gradients before the optimizer steps.
  const double averaged = options_.replicas.count > 1
                              ? all_reduce(placement, backward_end, backward_done, result)
                              : backward_done;

  // optimizer.step() runs after loss.backward() returns; devices update their own parameters.
  std::vector<double>& update = scratch.update;
  update.assign(D, 0.0);
  std::vector<char>& used = scratch.used;
  used.assign(D, 0);
  for (size_t u = 0; u < n; ++u) {
    update[resource[dev[u]]] += std::max(cost_of(u).update, 0.0);
    used[dev[u]] = 1;
  }
  // One training loop drives every device: its own cost (loss, backward's start, the optimizer's
  // loop) is paid once, by the slowest host among those in use.
  double step = averaged, loop = 0.0;
  for (size_t d = 0; d < D; ++d) {
    result.busy_s[d] += update[d];
    step = std::max(step, averaged + update[d]);
    if (used[d] && devices_.devices[d].spec)
      loop = std::max(loop, devices_.devices[d].spec->step_s);
  }
  result.step_time_s = step + loop;
  return result;
}

double Simulator::ring_allreduce_s(uint64_t bytes) const {
  const auto& r = options_.replicas;
  const double n = r.count;
  // Reduce-scatter then all-gather: N − 1 steps each, every step one message of bytes ÷ N.
  return 2.0 * (n - 1.0) * (r.link.latency + static_cast<double>(bytes) / n / r.link.bandwidth);
}

double Simulator::all_reduce(const Placement& placement, const std::vector<double>& backward_end,
                             double backward_done, SimulationResult& result) const {
  const auto& r = options_.replicas;
  const size_t D = devices_.size();
  // Each device's parameters, in the order backward finishes with them, fill buckets of at most
  // bucket_bytes (one parameter larger than that is a bucket alone); a bucket is ready when its
  // last gradient is.
  std::vector<std::vector<int>> by_device(D);
  for (size_t u = 0; u < graph_.ops.size(); ++u)
    if (graph_.ops[u].parameter_bytes > 0)
      by_device[placement.device_of_op[u]].push_back(static_cast<int>(u));
  struct Bucket {
    double ready = 0.0;
    uint64_t bytes = 0;
  };
  std::vector<Bucket> buckets;
  for (std::vector<int>& ops : by_device) {
    std::stable_sort(ops.begin(), ops.end(),
                     [&](int a, int b) { return backward_end[a] < backward_end[b]; });
    bool open = false;
    for (int u : ops) {
      const uint64_t bytes = graph_.ops[u].parameter_bytes;
      if (!open || buckets.back().bytes + bytes > r.bucket_bytes) buckets.push_back({});
      open = true;
      buckets.back().ready = std::max(buckets.back().ready, backward_end[u]);
      buckets.back().bytes += bytes;
    }
  }
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const Bucket& a, const Bucket& b) { return a.ready < b.ready; });
  // The node's link carries one bucket's ring at a time.
  double link_free = r.overlap ? 0.0 : backward_done;
  for (const Bucket& b : buckets) {
    const double seconds = ring_allreduce_s(b.bytes);
    link_free = std::max(link_free, r.overlap ? b.ready : backward_done) + seconds;
    result.allreduce_s += seconds;
    result.allreduce_bytes += b.bytes;
  }
  result.allreduce_buckets = buckets.size();
  const double done = std::max(link_free, backward_done);
  result.allreduce_exposed_s = done - backward_done;
  return done;
}

double Simulator::least_step_overhead_s() const {
  double least = std::numeric_limits<double>::infinity();
  for (const auto& d : devices_.devices) least = std::min(least, d.spec ? d.spec->step_s : 0.0);
  return std::isfinite(least) ? least : 0.0;
}

double Simulator::lower_bound_s() const {
  const size_t n = graph_.ops.size(), D = devices_.size();
  std::vector<double> best(n, -1.0);
  for (size_t u = 0; u < n; ++u) {
    for (size_t d = 0; d < D; ++d) {
      const Cost& c = costs_[u * D + d];
      if (c.forward >= 0 && holds_alone(u, d) && (best[u] < 0 || c.forward + c.backward < best[u]))
        best[u] = c.forward + c.backward;
    }
    if (best[u] < 0) {
      // Timed somewhere but held nowhere: no placement is valid.
      for (size_t d = 0; d < D; ++d)
        if (costs_[u * D + d].forward >= 0) return std::numeric_limits<double>::infinity();
      best[u] = 0.0;  // cannot be timed anywhere: contributes nothing we can bound
    }
  }
  // A chain's forward and backward times add up along every path.
  std::vector<double> path(n, 0.0);
  double critical = 0.0;
  for (int v : order_) {
    double longest = 0.0;
    for (int i = in_begin_[v]; i < in_begin_[v + 1]; ++i)
      longest = std::max(longest, path[in_edges_[i].src]);
    path[v] = longest + best[v];
    critical = std::max(critical, path[v]);
  }
  double bound = std::max(critical, work_bound_s());
  if (options_.replicas.count > 1) {
    // Every gradient crosses the ring, in at least ceil(total ÷ bucket_bytes) buckets: after
    // backward without overlap; with it, no step is shorter than the ring alone.
    uint64_t total = 0;
    for (const auto& op : graph_.ops) total += op.parameter_bytes;
    const uint64_t buckets =
        (total + options_.replicas.bucket_bytes - 1) / options_.replicas.bucket_bytes;
    const double ring = total == 0
                            ? 0.0
                            : ring_allreduce_s(total) + 2.0 * (options_.replicas.count - 1.0) *
                                                            options_.replicas.link.latency *
                                                            (static_cast<double>(buckets) - 1.0);
    bound = options_.replicas.overlap ? std::max(bound, ring) : bound + ring;
  }
  return bound + least_step_overhead_s();
}

// The busiest device works at least as long as the optimum T of the linear program that spreads
// each op fractionally over the devices (x[u][d] ≥ 0, Σ_d x[u][d] = 1) so that each device's time
// Σ_u x[u][d]·t[u][d] ≤ T and memory Σ_u x[u][d]·m[u] ≤ C[d]: every valid placement is one of its
// solutions. Identical devices merge into one type k of n[k] devices and M[k] bytes without
// changing the optimum (a fractional solution splits evenly among them); CPU devices that share the
// host merge into one type that counts as one device for time, since the host runs their ops one
// at a time. By weak duality, any α ≥ 0 with Σ_k n[k]·α[k] = 1 and λ ≥ 0 give a lower bound:
//     L(α, λ) = Σ_u min_k (α[k]·t[u][k] + λ[k]·m[u]/M[k]) − Σ_k λ[k].
// L is concave; the bound is the best L found by line searches (golden section, exact for a
// concave function) over α for each λ and over λ outside. Every L evaluated is a valid bound; with
// two device types (GPUs and their host, the usual node) the searches reach the LP's optimum. λ
// stays 0, and the bound is the memory-blind one, unless some type cannot hold the whole model;
// where the fast devices cannot, λ prices their memory and pushes work onto slower ones. When the
// model exceeds all devices together the LP has no solution: no placement is valid, the bound is
// infinite.
double Simulator::work_bound_s() const {
  const size_t n = graph_.ops.size(), D = devices_.size();
  const MemoryFloor floor = memory_floor();
  if (!floor.fits_all_devices) return std::numeric_limits<double>::infinity();
  auto total_time = [&](size_t u, size_t d) {
    const Cost& c = costs_[u * D + d];
    return c.forward < 0 ? -1.0 : c.forward + c.backward + std::max(c.update, 0.0);
  };
  // Device types: the host's CPU devices when they share it, else devices alike in every op's cost
  // and in memory.
  struct Type {
    std::vector<size_t> devices;
    double count = 0, memory = 0;
  };
  std::vector<Type> types;
  for (size_t d = 0; d < D; ++d) {
    const bool shared =
        options_.cpu_devices_share_host && devices_.devices[d].kind == DeviceKind::kCpu;
    auto same = [&](const Type& type) {
      const size_t e = type.devices.front();
      if (shared) return devices_.devices[e].kind == DeviceKind::kCpu;
      if (options_.cpu_devices_share_host && devices_.devices[e].kind == DeviceKind::kCpu)
        return false;
      if (capacity(e) != capacity(d)) return false;
      for (size_t u = 0; u < n; ++u)
        if (total_time(u, e) != total_time(u, d)) return false;
      return true;
    };
    auto it = std::find_if(types.begin(), types.end(), same);
    if (it == types.end()) it = types.insert(types.end(), Type{});
    it->devices.push_back(d);
    it->count = shared ? 1.0 : static_cast<double>(it->devices.size());
    it->memory += static_cast<double>(capacity(d));
  }
  const size_t K = types.size();
  std::vector<double> time(n * K, -1.0), memory(n);
  for (size_t u = 0; u < n; ++u) {
    memory[u] = static_cast<double>(parameter_state_bytes(u) + activation_bytes_[u]);
    for (size_t k = 0; k < K; ++k)
      for (size_t d : types[k].devices) {
        const double t = total_time(u, d);
        if (t >= 0 && holds_alone(u, d) && (time[u * K + k] < 0 || t < time[u * K + k]))
          time[u * K + k] = t;
      }
  }
  // Ops that only one type can hold must all fit there, with the largest one's output as some
  // device's working buffer.
  std::vector<double> forced(K, 0.0), forced_output(K, 0.0);
  for (size_t u = 0; u < n; ++u) {
    size_t holders = 0, at = 0;
    for (size_t k = 0; k < K; ++k)
      if (time[u * K + k] >= 0) ++holders, at = k;
    if (holders != 1) continue;
    forced[at] += memory[u];
    forced_output[at] =
        std::max(forced_output[at], static_cast<double>(graph_.ops[u].output_bytes()));
  }
  for (size_t k = 0; k < K; ++k)
    if (forced[k] + forced_output[k] > types[k].memory)
      return std::numeric_limits<double>::infinity();
  auto bound_at = [&](const std::vector<double>& alpha, const std::vector<double>& lambda) {
    double value = -std::accumulate(lambda.begin(), lambda.end(), 0.0);
    for (size_t u = 0; u < n; ++u) {
      double cheapest = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < K; ++k) {
        const double t = time[u * K + k];
        if (t < 0 || (types[k].memory <= 0 && memory[u] > 0)) continue;
        const double priced =
            alpha[k] * t + (lambda[k] > 0 ? lambda[k] * memory[u] / types[k].memory : 0.0);
        cheapest = std::min(cheapest, priced);
      }
      if (std::isfinite(cheapest)) value += cheapest;  // else: cannot be timed anywhere
    }
    return value;
  };
  // Maximizes a concave f over [lo, hi]; returns the argmax found. The ends are tried too: the
  // optimum is often there (a type that should take no work at all).
  auto golden = [](double lo, double hi, const std::function<double(double)>& f) {
    constexpr double kRatio = 0.6180339887498949;
    const double at_lo = f(lo), at_hi = f(hi), end = at_lo >= at_hi ? lo : hi,
                 f_end = std::max(at_lo, at_hi);
    double a = hi - kRatio * (hi - lo), b = lo + kRatio * (hi - lo), fa = f(a), fb = f(b);
    for (int i = 0; i < 40; ++i) {
      if (fa < fb) {
        lo = a, a = b, fa = fb;
        b = lo + kRatio * (hi - lo), fb = f(b);
      } else {
        hi = b, b = a, fb = fa;
        a = hi - kRatio * (hi - lo), fa = f(a);
      }
    }
    const double inner = fa < fb ? b : a;
    return std::max(fa, fb) >= f_end ? inner : end;
  };
  double bound = 0.0;
  std::vector<double> alpha(K), lambda(K, 0.0);
  double devices_counted = 0;
  for (const Type& type : types) devices_counted += type.count;
  for (size_t k = 0; k < K; ++k) alpha[k] = 1.0 / devices_counted;
  // α for this λ: mass moved between pairs of types (n[i]·α[i] + n[j]·α[j] stays), a round per
  // pair; one round is exact for two types.
  auto best_alpha = [&](const std::vector<double>& at_lambda) {
    const int rounds = K <= 2 ? 1 : 3;
    for (int round = 0; round < rounds; ++round)
      for (size_t i = 0; i < K; ++i)
        for (size_t j = i + 1; j < K; ++j) {
          const double ni = types[i].count, nj = types[j].count,
                       mass = ni * alpha[i] + nj * alpha[j];
          std::vector<double> trial = alpha;
          auto f = [&](double share) {  // share of the pair's mass on type i
            trial[i] = share * mass / ni;
            trial[j] = (1.0 - share) * mass / nj;
            const double v = bound_at(trial, at_lambda);
            bound = std::max(bound, v);
            return v;
          };
          f(golden(0.0, 1.0, f));
          alpha = trial;
        }
    return bound_at(alpha, at_lambda);
  };
  bound = std::max(bound, bound_at(alpha, lambda));
  best_alpha(lambda);
  // Types that cannot hold the whole model are the ones whose memory can bind.
  double slowest_total = 0.0;
  for (size_t u = 0; u < n; ++u) {
    double worst = 0.0;
    for (size_t k = 0; k < K; ++k) worst = std::max(worst, time[u * K + k]);
    slowest_total += worst;
  }
  for (int round = 0; round < (K <= 2 ? 1 : 2); ++round)
    for (size_t k = 0; k < K; ++k) {
      if (types[k].memory >= static_cast<double>(floor.bytes)) continue;
      // Searched up to twice the time the slowest devices would take for everything, which prices
      // this type out of every op that needs a noticeable share of its memory; every λ gives a
      // valid bound, a bracket too narrow only a lower one.
      std::vector<double> trial = lambda;
      auto f = [&](double value) {
        trial[k] = value;
        return best_alpha(trial);
      };
      lambda[k] = golden(0.0, 2.0 * slowest_total, f);
      f(lambda[k]);
    }
  return bound;
}

}  // namespace placementd::sim
