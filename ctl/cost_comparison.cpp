// placementctl simulate --by-kind: the cost model against a graph's measured profiles, per op kind,
// for each device of the topology with a spec and a profile of its kind in the graph. The
// comparison that re-fits a preset's efficiencies once a graph is profiled on the real device.

#include <algorithm>
#include <iostream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "planning/sim/cost_model.h"
#include "planning/sim/topology.h"
#include "table.h"

namespace placementctl {

using json = nlohmann::json;

namespace {

struct KindTotals {
  size_t ops = 0;
  double measured_forward = 0, measured_backward = 0, predicted_forward = 0, predicted_backward = 0;
};

std::string signed_percent(double predicted, double measured) {
  if (!(measured > 0)) return "-";
  const double error = (predicted - measured) / measured;
  return (error >= 0 ? "+" : "") + format_percent(error);
}

}  // namespace

int compare_costs(const Globals& g, const std::string& graph_file, const std::string& topology_file,
                  const placementd::sim::MathModes& math) {
  const placement::DeviceSet devices = placementd::sim::load_topology(topology_file);
  const placement::OpGraph graph = load_timeable_graph(graph_file);
  json out = {{"graph", graph.name}, {"devices", json::array()}};
  bool any = false;
  for (const placement::Device& device : devices.devices) {
    const std::string kind = placement::to_string(device.kind);
    if (!device.spec) continue;
    std::map<std::string, KindTotals> by_kind;
    KindTotals all;
    for (const placement::Op& op : graph.ops) {
      const auto profile = op.profile.find(kind);
      if (!op.work || profile == op.profile.end() || profile->second.predicted) continue;
      const placementd::sim::PredictedTime p =
          placementd::sim::predict_op_time(*op.work, *device.spec, math);
      for (KindTotals* t : {&by_kind[op.kind], &all}) {
        ++t->ops;
        t->measured_forward += profile->second.forward_s / device.speed;
        t->measured_backward += profile->second.backward_s / device.speed;
        t->predicted_forward += p.forward_s;
        t->predicted_backward += p.backward_s;
      }
    }
    if (all.ops == 0) continue;
    any = true;
    std::vector<std::pair<std::string, KindTotals>> rows(by_kind.begin(), by_kind.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return a.second.measured_forward + a.second.measured_backward >
             b.second.measured_forward + b.second.measured_backward;
    });
    rows.emplace_back("all", all);
    json kinds = json::array();
    Table t({"KIND", "OPS", "MEASURED FWD", "PREDICTED FWD", "ERROR", "MEASURED BWD",
             "PREDICTED BWD", "ERROR"});
    for (const auto& [name, k] : rows) {
      kinds.push_back({{"kind", name},
                       {"ops", k.ops},
                       {"measured_forward_s", k.measured_forward},
                       {"predicted_forward_s", k.predicted_forward},
                       {"measured_backward_s", k.measured_backward},
                       {"predicted_backward_s", k.predicted_backward}});
      t.add({name, std::to_string(k.ops), format_seconds(&k.measured_forward),
             format_seconds(&k.predicted_forward),
             signed_percent(k.predicted_forward, k.measured_forward),
             format_seconds(&k.measured_backward), format_seconds(&k.predicted_backward),
             signed_percent(k.predicted_backward, k.measured_backward)});
    }
    out["devices"].push_back(
        {{"device", device.name()}, {"spec", device.spec->preset}, {"kinds", kinds}});
    if (!g.json) {
      std::cout << graph.name << " on " << device.name()
                << (device.spec->preset.empty() ? "" : " (" + device.spec->preset + ")") << ": the "
                << kind << " profile measured against the cost model, per op kind\n";
      t.print(std::cout);
      std::cout << "\n";
    }
  }
  if (!any)
    throw std::runtime_error(graph_file + ": no op has a measured profile for a device of " +
                             topology_file +
                             " with a spec; capture it with --profile on that kind of device");
  if (g.json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace placementctl
