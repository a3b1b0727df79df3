#include <algorithm>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "placement/serialization.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"
#include "table.h"

namespace placementctl {

using nlohmann::json;

namespace {

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

json result_json(const placementd::sim::SimulationResult& r, const placement::DeviceSet& devices) {
  json per_device = json::array();
  for (size_t d = 0; d < devices.size(); ++d)
    per_device.push_back({{"name", devices.devices[d].name()},
                          {"busy_s", r.busy_s.empty() ? 0.0 : r.busy_s[d]},
                          {"peak_bytes", r.memory[d].peak()},
                          {"parameter_bytes", r.memory[d].parameters},
                          {"activation_bytes", r.memory[d].activations},
                          {"capacity_bytes", r.memory[d].capacity}});
  return {{"valid", r.valid},
          {"invalid_reason", r.valid ? json(nullptr) : json(r.invalid_reason)},
          {"step_time_s", r.step_time_s},
          {"forward_s", r.forward_s},
          {"backward_s", r.backward_s},
          {"transfers", r.transfers},
          {"transferred_bytes", r.transferred_bytes},
          {"predicted_ops", r.predicted_ops},
          {"allreduce_s", r.allreduce_s},
          {"allreduce_exposed_s", r.allreduce_exposed_s},
          {"allreduce_bytes", r.allreduce_bytes},
          {"allreduce_buckets", r.allreduce_buckets},
          {"devices", per_device}};
}

// Where a placement's residence keeps tensors, per device, in bytes: what the engine will hold
// there apart from what its ops compute (docs/capture-and-engine.md, "Residence").
struct ResidenceBytes {
  uint64_t parameters_homed = 0;   // parameters, with their gradients and optimizer state
  uint64_t persistent_copies = 0;  // persist proxies: copies kept beside their readers
  uint64_t streamed = 0;           // stream proxies: copied in for each use, dropped after
  uint64_t activations_in = 0;     // outputs other devices' ops offload here
  uint64_t activations_out = 0;    // outputs its ops offload elsewhere or recompute
};

std::vector<ResidenceBytes> residence_bytes(const placement::OpGraph& graph,
                                            const placement::Placement& p, size_t devices) {
  std::vector<ResidenceBytes> out(devices);
  const placement::Residence& r = p.residence;
  for (size_t k = 0; k < graph.parameters.size(); ++k) {
    const placement::Parameter& meta = graph.parameters[k];
    const int home = p.home_of_parameter(graph, k);
    if (home < 0 || meta.readers.empty()) continue;
    out[static_cast<size_t>(home)].parameters_homed += meta.bytes;
    const int reader = p.proxy_device_of_parameter(graph, k);
    if (reader < 0 || k >= r.parameters.size()) continue;
    ResidenceBytes& at_reader = out[static_cast<size_t>(reader)];
    (r.parameters[k].fetch == placement::Fetch::kPersist ? at_reader.persistent_copies
                                                         : at_reader.streamed) += meta.bytes;
  }
  for (size_t op = 0; op < r.activations.size() && op < graph.ops.size(); ++op) {
    const placement::ActivationResidence& a = r.activations[op];
    if (a.policy == placement::ActivationPolicy::kKeep) continue;
    const uint64_t bytes = graph.ops[op].output_bytes();
    out[static_cast<size_t>(p.device_of_op[op])].activations_out += bytes;
    if (a.policy == placement::ActivationPolicy::kOffload && a.device >= 0)
      out[static_cast<size_t>(a.device)].activations_in += bytes;
  }
  return out;
}

json residence_json(const std::vector<ResidenceBytes>& bytes, const placement::DeviceSet& devices) {
  json per_device = json::array();
  for (size_t d = 0; d < devices.size(); ++d)
    per_device.push_back({{"name", devices.devices[d].name()},
                          {"parameters_homed_bytes", bytes[d].parameters_homed},
                          {"persistent_copy_bytes", bytes[d].persistent_copies},
                          {"streamed_bytes", bytes[d].streamed},
                          {"activation_bytes_offloaded_here", bytes[d].activations_in},
                          {"activation_bytes_offloaded_or_recomputed", bytes[d].activations_out}});
  return {{"modelled", false}, {"devices", per_device}};
}

// One line per device that holds something under the residence.
std::string describe_residence(const std::vector<ResidenceBytes>& bytes,
                               const placement::DeviceSet& devices) {
  std::string text;
  for (size_t d = 0; d < devices.size(); ++d) {
    const ResidenceBytes& b = bytes[d];
    std::string parts;
    const auto add = [&](uint64_t n, const char* what) {
      if (n > 0) parts += (parts.empty() ? "" : ", ") + mib(n) + " " + what;
    };
    add(b.parameters_homed, "of parameters homed (with their gradients and optimizer state)");
    add(b.persistent_copies, "of persistent copies");
    add(b.streamed, "streamed in for each use");
    add(b.activations_in, "of activations offloaded here");
    add(b.activations_out, "of activations offloaded or recomputed away");
    if (!parts.empty()) text += "  " + devices.devices[d].name() + ": " + parts + "\n";
  }
  return text;
}

}  // namespace

placement::OpGraph load_timeable_graph(const std::string& path) {
  placement::OpGraph graph = placement::load_graph_file(path);
  for (const placement::Op& op : graph.ops)
    if (!op.profile.empty() || op.work) return graph;
  throw std::runtime_error(
      path +
      ": no op has a profile or recorded work, so no placement of it can be timed (a "
      "file from before placementd counted op work); capture it again with "
      "`placementctl capture MODEL.pt --input SHAPE -o GRAPH.json.gz` "
      "(docs/capture-and-engine.md)");
}

placementd::sim::SimulatorOptions::Replicas replica_options(
    const ReplicaArgs& args, const placementd::sim::Topology& topology,
    const std::string& topology_file) {
  placementd::sim::SimulatorOptions::Replicas out;
  out.count = args.replicas;
  out.bucket_bytes = static_cast<uint64_t>(args.bucket_mib * (1 << 20));
  out.overlap = args.overlap;
  if (args.replicas > 1) {
    if (!topology.node_link)
      throw std::invalid_argument(
          "--replicas " + std::to_string(args.replicas) + ": " + topology_file +
          " has no link between nodes for the gradients' all-reduce; add one, e.g. "
          "[[link]] between = [\"node\", \"node\"], bandwidth_gbs = 50 (400 Gb/s), "
          "latency_us = 5");
    out.link = *topology.node_link;
  }
  return out;
}

std::string describe_replicas(const placementd::sim::SimulatorOptions::Replicas& r) {
  if (r.count <= 1) return "";
  char text[160];
  std::snprintf(text, sizeof(text),
                " x %d nodes (ring all-reduce over %.1f GB/s, %.0f MiB buckets, %s)", r.count,
                r.link.bandwidth / 1e9, static_cast<double>(r.bucket_bytes) / (1 << 20),
                r.overlap ? "overlapped with backward" : "after backward");
  return text;
}

void warn_untimeable(const placementd::sim::Simulator& sim, const std::string& topology_file) {
  const auto& devices = sim.devices().devices;
  for (size_t d = 0; d < devices.size(); ++d) {
    const auto [count, why] = sim.untimeable_ops(static_cast<int>(d));
    if (count > 0)
      std::cerr << "placementctl: note: " << topology_file << ": " << count << " of "
                << sim.graph().ops.size() << " ops cannot be placed on " << devices[d].name()
                << "; " << why << "\n";
  }
}

int simulate(const Globals& g, const std::string& graph_file, const std::string& topology_file,
             const std::string& placement_file, const placementd::sim::MathModes& math,
             const ReplicaArgs& replicas) {
  const placementd::sim::Topology topology = placementd::sim::load_topology_file(topology_file);
  const placement::DeviceSet& devices = topology.devices;
  placement::OpGraph graph = load_timeable_graph(graph_file);
  placementd::sim::SimulatorOptions options;
  options.math = math;
  options.replicas = replica_options(replicas, topology, topology_file);
  const bool replicated = options.replicas.count > 1;
  const placementd::sim::Simulator sim(graph, devices, options);
  warn_untimeable(sim, topology_file);

  std::vector<std::pair<std::string, placement::Placement>> candidates;
  if (!placement_file.empty()) {
    try {
      candidates.emplace_back(
          placement_file, placement::placement_from_json(placement::read_json_file(placement_file),
                                                         graph, devices));
    } catch (const placement::FormatError& e) {
      throw placement::FormatError(placement_file + ": " + e.what());
    }
  } else {
    for (size_t d = 0; d < devices.size(); ++d) {
      placement::Placement p = placement::Placement::single(graph, static_cast<int>(d));
      p.enforce_pins(graph, devices);
      candidates.emplace_back("all on " + devices.devices[d].name(), p);
    }
  }
  const double bound = sim.lower_bound_s();
  const auto floor = sim.memory_floor();
  json out = {{"graph", graph.name},
              {"fingerprint", graph.fingerprint()},
              {"ops", graph.ops.size()},
              {"lower_bound_s", std::isfinite(bound) ? json(bound) : json(nullptr)},
              {"memory_floor_bytes", floor.bytes},
              {"fits_one_device", floor.fits_one_device},
              {"fits_all_devices", floor.fits_all_devices},
              {"replicas", options.replicas.count},
              {"placements", json::array()}};
  std::vector<std::string> columns = {"PLACEMENT", "STEP",      "FORWARD",  "BACKWARD",
                                      "TRANSFERS", "PREDICTED", "VS BOUND", "MEMORY"};
  if (replicated) columns.insert(columns.begin() + 4, "ALL-REDUCE (WAITED)");
  Table t(columns);
  std::string residence_notes;
  for (const auto& [name, p] : candidates) {
    placementd::sim::SimulationResult r;
    try {
      r = sim.simulate(p);
    } catch (const std::invalid_argument& e) {
      // Ops on a device they cannot be timed on (warn_untimeable said which and why).
      out["placements"].push_back({{"name", name}, {"timed", false}, {"reason", e.what()}});
      std::vector<std::string> row = {name, "-", "-", "-",
                                      "-",  "-", "-", "CANNOT TIME: see the note above"};
      if (replicated) row.insert(row.begin() + 4, "-");
      t.add(row);
      continue;
    }
    json j = result_json(r, devices);
    j["name"] = name;
    j["timed"] = true;
    if (!p.residence.is_default()) {
      const std::vector<ResidenceBytes> bytes = residence_bytes(graph, p, devices.size());
      j["residence"] = residence_json(bytes, devices);
      residence_notes += "\n" + name +
                         " has a residence, which the simulator does not model yet: the figures "
                         "above time and size it as if every tensor lived where its op runs. Where "
                         "it keeps them:\n" +
                         describe_residence(bytes, devices);
    }
    out["placements"].push_back(j);
    std::string memory;
    for (size_t d = 0; d < devices.size(); ++d)
      if (r.memory[d].peak() > 0)
        memory += (memory.empty() ? "" : ", ") + devices.devices[d].name() + " " +
                  mib(r.memory[d].peak());
    char ratio[32];
    if (bound > 0 && std::isfinite(bound))
      std::snprintf(ratio, sizeof(ratio), "%.2fx", r.step_time_s / bound);
    else
      std::snprintf(ratio, sizeof(ratio), "-");
    std::vector<std::string> row = {
        name,
        format_seconds(&r.step_time_s),
        format_seconds(&r.forward_s),
        format_seconds(&r.backward_s),
        std::to_string(r.transfers),
        std::to_string(r.predicted_ops) + "/" + std::to_string(graph.ops.size()),
        ratio,
        r.valid ? memory : "INVALID: " + r.invalid_reason};
    if (replicated)
      row.insert(row.begin() + 4, format_seconds(&r.allreduce_s) + " (" +
                                      format_seconds(&r.allreduce_exposed_s) + ")");
    t.add(row);
  }
  if (g.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "graph " << graph.name << " (" << graph.ops.size() << " ops, " << graph.fingerprint()
            << ") on " << devices.size() << " devices" << describe_replicas(options.replicas)
            << "; lower bound "
            << (std::isfinite(bound) ? format_seconds(&bound) : std::string("none"))
            << "; needs at least " << mib(floor.bytes)
            << (!floor.fits_all_devices ? ": more than all devices have together, no placement fits"
                : !std::isfinite(bound)
                    ? "; the ops that only one kind of device can hold need more than those "
                      "devices have, no placement fits"
                : !floor.fits_one_device ? ": more than any one device has, so it must be split"
                                         : "")
            << "\n\n";
  t.print(std::cout);
  std::cout << residence_notes;
  return 0;
}

}  // namespace placementctl
