#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "config/paths.h"
#include "placement/serialization.h"
#include "planning/offline/optimize.h"
#include "planning/sim/simulator.h"
#include "planning/sim/topology.h"
#include "plugins/plugin_registry.h"
#include "svg_plot.h"
#include "table.h"

namespace placementctl {

using nlohmann::json;

namespace {

// "true"/"false", integers and decimals take their type; anything else is a string. The registry
// accepts an integer where a float is declared, so "0" works for a float parameter too.
placement::ParamValue parse_value(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  try {
    size_t used = 0;
    const long long i = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(i);
  } catch (const std::exception&) {
  }
  try {
    size_t used = 0;
    const double d = std::stod(text, &used);
    if (used == text.size()) return d;
  } catch (const std::exception&) {
  }
  return text;
}

void apply_settings(const std::vector<std::string>& settings,
                    placementd::offline::OptimizeOptions& o) {
  for (const std::string& s : settings) {
    const size_t dot = s.find('.'), eq = s.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot > eq)
      throw std::invalid_argument("--set " + s +
                                  ": expected KIND.KEY=VALUE, e.g. placer.hidden=128");
    const std::string kind = s.substr(0, dot), key = s.substr(dot + 1, eq - dot - 1);
    placement::ParamValue value = parse_value(s.substr(eq + 1));
    if (kind == "grouper")
      o.grouper.params[key] = value;
    else if (kind == "placer")
      o.placer.params[key] = value;
    else if (kind == "algorithm")
      o.algorithm.params[key] = value;
    else
      throw std::invalid_argument("--set " + s + ": KIND must be grouper, placer or algorithm");
  }
}

json seconds_or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Libraries under the plugins write to stdout (libmetis prints "***Cannot bisect a graph with 0
// vertices!" when asked for many parts): while it lives, fd 1 is stderr, so stdout carries only
// placementctl's own output (the JSON with --json).
class LibraryOutputToStderr {
 public:
  LibraryOutputToStderr() {
    std::cout.flush();
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    if (saved_ >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~LibraryOutputToStderr() {
    std::fflush(stdout);
    if (saved_ < 0) return;
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  LibraryOutputToStderr(const LibraryOutputToStderr&) = delete;
  LibraryOutputToStderr& operator=(const LibraryOutputToStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

int optimize(const Globals& g, const OptimizeArgs& a) {
  const placementd::sim::Topology topology = placementd::sim::load_topology_file(a.topology);
  const placement::DeviceSet& devices = topology.devices;
  placementd::sim::SimulatorOptions sim_options;
  sim_options.math = a.math;
  sim_options.replicas = replica_options(a.replicas, topology, a.topology);
  const placementd::sim::Simulator simulator(load_timeable_graph(a.graph), devices, sim_options);
  if (!g.json) warn_untimeable(simulator, a.topology);
  if (const auto floor = simulator.memory_floor(); !floor.fits_all_devices) {
    char text[160];
    std::snprintf(
        text, sizeof(text),
        "needs at least %.1f GiB with its optimizer state, and the devices hold %.1f GiB together",
        static_cast<double>(floor.bytes) / (1ull << 30),
        static_cast<double>(floor.all_devices_bytes) / (1ull << 30));
    throw std::invalid_argument(a.graph + " on " + a.topology + ": no placement fits: the model " +
                                text + " (add devices, or capture it at a smaller batch)");
  }
  if (!std::isfinite(simulator.lower_bound_s()))
    throw std::invalid_argument(
        a.graph + " on " + a.topology +
        ": no placement fits: the ops that only one kind of device can hold (each too large "
        "for the others) need more memory than those devices have (placementctl simulate "
        "shows the memory; add devices, or capture it at a smaller batch)");
  placementd::PluginRegistry registry;
  registry.scan(a.plugin_dirs.empty() ? std::vector<std::string>{placementd::default_plugin_dir()}
                                      : a.plugin_dirs);

  placementd::offline::OptimizeOptions o;
  o.grouper.name = a.grouper;
  o.placer.name = a.placer;
  o.algorithm.name = a.algorithm;
  o.max_groups = a.max_groups;
  o.budget = a.budget;
  o.seed = a.seed;
  o.noise = a.noise;
  o.imitation.baseline = a.imitate;
  o.imitation.max_steps = a.imitation_steps;
  o.imitation.search.evaluations = a.search_evaluations;
  o.imitation.search_ensemble = a.search_ensemble;
  o.model_error = a.model_error;
  o.selection = placementd::offline::selection_names().at(a.selection);
  apply_settings(a.settings, o);
  const bool bar =
      !g.json && (a.progress == "on" || (a.progress == "auto" && ::isatty(STDERR_FILENO)));
  if (bar)
    o.progress = [](int64_t done, int64_t total, std::optional<double> best) {
      std::cerr << "\r" << progress_bar(static_cast<double>(done) / static_cast<double>(total), 30)
                << "  " << done << "/" << total << "  best " << format_seconds(best) << "   "
                << std::flush;
      if (done == total) std::cerr << "\n";
    };

  const placementd::offline::OptimizeResult r = [&] {
    LibraryOutputToStderr quiet;
    return placementd::offline::optimize(simulator, registry, o);
  }();
  if (r.best_source.empty()) {
    std::cerr << "placementctl: no valid placement found: every candidate and every baseline runs "
                 "out of memory\n";
    return 4;
  }
  if (!a.out.empty()) placement::write_json_file(a.out, placement::to_json(r.best, devices));
  if (!a.plot.empty()) {
    CurvePlot plot;
    plot.title = simulator.graph().name + ": " + a.grouper + " + " + a.placer + " + " +
                 a.algorithm + " (seed " + std::to_string(a.seed) + ")";
    for (const auto& e : r.curve) {
      plot.samples.push_back(e.step_time_s);
      plot.best.push_back(e.best_so_far_s);
    }
    for (const auto& [name, t] : r.baselines)
      if (t) plot.references.emplace_back(name, *t);
    plot.references.emplace_back("lower bound", r.lower_bound_s);
    write_curve_svg(a.plot, plot);
  }

  // What the gradients' all-reduce costs the best placement: the ring's time, and what of it the
  // step waits for beyond backward.
  std::optional<placementd::sim::SimulationResult> best_run;
  if (sim_options.replicas.count > 1) best_run = simulator.simulate(r.best);
  if (g.json) {
    json baselines = json::object();
    for (const auto& [name, t] : r.baselines) baselines[name] = seconds_or_null(t);
    json curve = json::array();
    for (const auto& e : r.curve) curve.push_back(seconds_or_null(e.best_so_far_s));
    std::cout << json{{"graph", simulator.graph().name},
                      {"ops", simulator.graph().ops.size()},
                      {"groups", r.num_groups},
                      {"devices", devices.size()},
                      {"replicas", sim_options.replicas.count},
                      {"best_allreduce_s", best_run ? json(best_run->allreduce_s) : json(nullptr)},
                      {"best_allreduce_exposed_s",
                       best_run ? json(best_run->allreduce_exposed_s) : json(nullptr)},
                      {"grouper", a.grouper},
                      {"placer", a.placer},
                      {"algorithm", a.algorithm},
                      {"seed", a.seed},
                      {"best_step_time_s", r.best_step_time_s},
                      {"best_source", r.best_source},
                      {"policy_best_step_time_s", seconds_or_null(r.policy_best_s)},
                      {"selection", a.selection},
                      {"estimated_model_error",
                       r.estimated_model_error ? json(*r.estimated_model_error) : json(nullptr)},
                      {"baselines", baselines},
                      {"baseline_errors", r.baseline_errors},
                      {"lower_bound_s", r.lower_bound_s},
                      {"evaluations", r.evaluations},
                      {"evaluations_to_within_2pct", r.evaluations_to_within_2pct
                                                         ? json(*r.evaluations_to_within_2pct)
                                                         : json(nullptr)},
                      {"invalid_rejected", r.invalid_rejected},
                      {"invalid_by_device", r.invalid_by_device},
                      {"warm_start",
                       r.imitation ? placementd::offline::to_json(*r.imitation) : json(nullptr)},
                      {"best_so_far_s", curve},
                      {"wall_s", r.wall_s}}
                     .dump(2)
              << "\n";
    return 0;
  }

  std::cout << simulator.graph().name << ": " << simulator.graph().ops.size() << " ops in "
            << r.num_groups << " groups on " << devices.size() << " devices"
            << describe_replicas(sim_options.replicas) << "; " << a.grouper << " + " << a.placer
            << " + " << a.algorithm << ", seed " << a.seed << ", noise " << a.noise * 100
            << "%\n\n";
  if (r.imitation)
    std::cout << "warm start: " << describe_warm_start(placementd::offline::to_json(*r.imitation))
              << "\n\n";
  std::cout << "learning curve (best simulated step time after N candidates):\n";
  Table curve({"CANDIDATES", "BEST"});
  for (int64_t n : {1, 10, 25, 50, 100, 200, 500, 1000, 2000, 5000, 10000})
    if (n < r.evaluations)
      curve.add({std::to_string(n), format_seconds(r.curve[n - 1].best_so_far_s)});
  curve.add({std::to_string(r.evaluations), format_seconds(r.policy_best_s)});
  curve.print(std::cout);
  std::cout << "\n";
  Table t({"PLACEMENT", "STEP", "VS BOUND"});
  auto ratio = [&](double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2fx", r.lower_bound_s > 0 ? s / r.lower_bound_s : 0.0);
    return std::string(buf);
  };
  for (const auto& [name, s] : r.baselines)
    t.add({name, s ? format_seconds(s) : "invalid", s ? ratio(*s) : "-"});
  t.add({"policy (" + a.placer + ")", format_seconds(r.policy_best_s),
         r.policy_best_s ? ratio(*r.policy_best_s) : "-"});
  t.add({"best", format_seconds(&r.best_step_time_s), ratio(r.best_step_time_s)});
  t.add({"lower bound", format_seconds(&r.lower_bound_s), "1.00x"});
  t.print(std::cout);
  if (best_run)
    std::cout << "\nbest placement's gradient all-reduce: "
              << format_seconds(&best_run->allreduce_s) << " on the ring in "
              << best_run->allreduce_buckets << " buckets, "
              << format_seconds(&best_run->allreduce_exposed_s) << " of it after backward\n";
  std::cout << "\nbest from " << r.best_source << "; " << r.evaluations << " candidates evaluated";
  if (r.evaluations_to_within_2pct)
    std::cout << ", within 2% of the policy's best after " << *r.evaluations_to_within_2pct;
  std::cout << "; " << r.invalid_rejected << " rejected by the memory model";
  for (const auto& [device, n] : r.invalid_by_device)
    std::cout << " (" << device << ": " << n << ")";
  char wall[32];
  std::snprintf(wall, sizeof(wall), "%.1f s", r.wall_s);
  std::cout << "; " << wall << "\n";
  if (r.estimated_model_error) {
    char error[32];
    std::snprintf(error, sizeof(error), "%.1f%%", *r.estimated_model_error * 100);
    std::cout << "policy's best chosen on measurements corrected by the planning model (its error "
                 "there estimated at "
              << error << ")\n";
  } else {
    std::cout << "policy's best chosen on its lowest measurement\n";
  }
  for (const auto& [name, why] : r.baseline_errors)
    std::cout << "baseline " << name << ": " << why << "\n";
  if (!a.out.empty()) std::cout << "best placement written to " << a.out << "\n";
  if (!a.plot.empty()) std::cout << "learning curve written to " << a.plot << "\n";
  return 0;
}

}  // namespace placementctl
