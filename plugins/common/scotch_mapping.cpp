#include "scotch_mapping.h"

// scotch.h uses FILE and the fixed-width types without including their headers.
#include <cstdint>
#include <cstdio>

#include <scotch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace placement::plugins {

namespace {

void check(int rc, const char* call) {
  if (rc != 0) throw std::runtime_error(std::string("Scotch: ") + call + " failed");
}

// Scotch weights are integers (32-bit in Debian's build). Work and traffic are scaled by the caller
// to µs and KiB; keep them positive and far enough from overflow that sums stay in range.
SCOTCH_Num clamp_load(double w) {
  // Sums of weights over a part must not overflow SCOTCH_Num.
  constexpr SCOTCH_Num kMaxWeight = std::numeric_limits<SCOTCH_Num>::max() / 4096;
  return static_cast<SCOTCH_Num>(std::clamp(std::round(w), 1.0, static_cast<double>(kMaxWeight)));
}

// Ratios survive the rounding to integers when the smallest value becomes 16.
std::vector<SCOTCH_Num> integer_ratios(const std::vector<double>& values) {
  double smallest = std::numeric_limits<double>::infinity();
  for (double v : values)
    if (v > 0) smallest = std::min(smallest, v);
  std::vector<SCOTCH_Num> out;
  for (double v : values)
    out.push_back(clamp_load(std::isfinite(smallest) ? 16.0 * v / smallest : 1.0));
  return out;
}

// Owner of one Scotch structure, so that every exit path frees it.
template <class T, int (*Init)(T*), void (*Exit)(T*)>
class Owned {
 public:
  Owned() { check(Init(&value_), "SCOTCH_*Init"); }
  ~Owned() { Exit(&value_); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T* get() { return &value_; }

 private:
  T value_;
};
using Graph = Owned<SCOTCH_Graph, SCOTCH_graphInit, SCOTCH_graphExit>;
using Arch = Owned<SCOTCH_Arch, SCOTCH_archInit, SCOTCH_archExit>;
using Strat = Owned<SCOTCH_Strat, SCOTCH_stratInit, SCOTCH_stratExit>;
using Context = Owned<SCOTCH_Context, SCOTCH_contextInit, SCOTCH_contextExit>;

// CSR arrays for SCOTCH_graphBuild; the graph keeps pointers into them.
struct Csr {
  std::vector<SCOTCH_Num> vert{0}, vload, edge, eload;
};

Csr to_csr(const std::vector<std::map<int, double>>& adjacency,
           const std::vector<SCOTCH_Num>& vload) {
  Csr csr;
  csr.vload = vload;
  for (const auto& neighbours : adjacency) {
    for (const auto& [v, w] : neighbours) {
      csr.edge.push_back(v);
      csr.eload.push_back(clamp_load(w));
    }
    csr.vert.push_back(static_cast<SCOTCH_Num>(csr.edge.size()));
  }
  return csr;
}

void build(Graph& graph, Csr& csr) {
  const SCOTCH_Num n = static_cast<SCOTCH_Num>(csr.vload.size());
  check(SCOTCH_graphBuild(graph.get(), 0, n, csr.vert.data(), nullptr, csr.vload.data(), nullptr,
                          static_cast<SCOTCH_Num>(csr.edge.size()), csr.edge.data(),
                          csr.eload.data()),
        "SCOTCH_graphBuild");
  check(SCOTCH_graphCheck(graph.get()), "SCOTCH_graphCheck");
}

}  // namespace

TargetMachine target_machine(const OpGraph& graph, const DeviceSet& devices,
                             const std::vector<int>& usable) {
  // Total forward + backward time per profiled device kind; the fastest kind's total is the unit.
  std::map<std::string, double> total;
  for (const Op& op : graph.ops)
    for (const auto& [kind, p] : op.profile) total[kind] += p.forward_s + p.backward_s;
  double fastest = 0;
  for (const auto& [kind, t] : total)
    if (t > 0) fastest = fastest == 0 ? t : std::min(fastest, t);
  TargetMachine target;
  for (int d : usable) {
    const auto it = total.find(to_string(devices.devices[d].kind));
    const double relative =
        fastest > 0 && it != total.end() && it->second > 0 ? fastest / it->second : 1.0;
    target.power.push_back(devices.devices[d].speed * relative);
    std::vector<double> row;
    for (int e : usable) {
      const double bandwidth = d == e ? 0.0 : devices.bandwidth[d][e];
      row.push_back(d == e ? 0.0
                           : devices.latency[d][e] + (bandwidth > 0 ? 1048576.0 / bandwidth : 1.0));
    }
    target.distance.push_back(std::move(row));
  }
  return target;
}

std::vector<int> scotch_map(const WeightedGraph& graph, const TargetMachine& target,
                            double imbalance, int64_t seed) {
  const size_t n = graph.vertex_weight.size(), processors = target.power.size();
  if (processors == 0)
    throw std::invalid_argument("Scotch mapping: the target machine has no processors");
  if (n == 0 || processors == 1) return std::vector<int>(n, 0);

  // The target: a complete graph over the processors, loads = compute power, edge loads = distance
  // (Scotch's decomposition-defined architecture takes distances as shortest paths over it).
  std::vector<std::map<int, double>> machine(processors);
  std::vector<double> distances;
  for (size_t i = 0; i < processors; ++i)
    for (size_t j = 0; j < processors; ++j)
      if (i != j) distances.push_back(std::max(target.distance[i][j], target.distance[j][i]));
  const std::vector<SCOTCH_Num> distance_ratio = integer_ratios(distances);
  size_t k = 0;
  for (size_t i = 0; i < processors; ++i)
    for (size_t j = 0; j < processors; ++j)
      if (i != j) machine[i][static_cast<int>(j)] = static_cast<double>(distance_ratio[k++]);
  Csr machine_csr = to_csr(machine, integer_ratios(target.power));
  Graph machine_graph;
  build(machine_graph, machine_csr);

  std::vector<SCOTCH_Num> vload;
  for (double w : graph.vertex_weight) vload.push_back(clamp_load(w));
  Csr csr = to_csr(graph.adjacency(), vload);
  Graph source;
  build(source, csr);

  // A context of our own, seeded here, for both the target's decomposition and the mapping:
  // Scotch's global generator would make a second call in the process differ from the first, and
  // concurrent sessions would share it. One thread, because the deterministic option alone does not
  // make threaded runs repeatable, and group graphs are small.
  Context context;
  check(SCOTCH_contextThreadSpawn(context.get(), 1, nullptr), "SCOTCH_contextThreadSpawn");
  check(SCOTCH_contextRandomClone(context.get()), "SCOTCH_contextRandomClone");
  check(SCOTCH_contextOptionSetNum(context.get(), SCOTCH_OPTIONNUMDETERMINISTIC, 1),
        "SCOTCH_contextOptionSetNum");
  SCOTCH_contextRandomSeed(context.get(), static_cast<SCOTCH_Num>(seed));
  Graph bound_machine, bound;
  check(SCOTCH_contextBindGraph(context.get(), machine_graph.get(), bound_machine.get()),
        "SCOTCH_contextBindGraph");
  check(SCOTCH_contextBindGraph(context.get(), source.get(), bound.get()),
        "SCOTCH_contextBindGraph");
  Arch arch;
  Strat arch_strat;
  check(SCOTCH_archBuild0(arch.get(), bound_machine.get(), 0, nullptr, arch_strat.get()),
        "SCOTCH_archBuild0");

  Strat strat;
  check(SCOTCH_stratGraphMapBuild(strat.get(), SCOTCH_STRATQUALITY,
                                  static_cast<SCOTCH_Num>(processors), imbalance),
        "SCOTCH_stratGraphMapBuild");
  std::vector<SCOTCH_Num> part(n, 0);
  check(SCOTCH_graphMap(bound.get(), arch.get(), strat.get(), part.data()), "SCOTCH_graphMap");
  return std::vector<int>(part.begin(), part.end());
}

}  // namespace placement::plugins
