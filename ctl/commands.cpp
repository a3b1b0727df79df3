#include "commands.h"

#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "config/config_check.h"
#include "config/paths.h"
#include "placement/client.h"
#include "svg_plot.h"
#include "table.h"

namespace placementctl {

using nlohmann::json;
using placement::protocol::MessageType;
namespace msg = placement::messages;

namespace {

json ask(const Globals& g, MessageType type, const json& body, MessageType reply) {
  placement::Client client({g.socket, "placementctl", g.timeout_ms});
  return client.request(type, body, reply);
}

// "exploiting (paused)" while a job of unknown length waits for its exploration pace to allow more.
std::string state_of(const json& job) {
  std::string state = job["state"].get<std::string>();
  if (job.value("paused", false)) state += " (paused)";
  if (job.value("policy_error", json()).is_string()) state += " (plugin failed)";
  return state;
}

std::string seconds(const json& value) {
  if (!value.is_number()) return "-";
  const double s = value.get<double>();
  return format_seconds(&s);
}

std::string speedup(const json& job) {
  const json& start = job["start_step_time_s"];
  const json& best = job["best_step_time_s"];
  if (!start.is_number() || !best.is_number() || best.get<double>() <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", start.get<double>() / best.get<double>());
  return buf;
}

}  // namespace

std::string describe_warm_start(const json& w) {
  if (!w["skipped"].is_null()) return "skipped: " + w["skipped"].get<std::string>();
  char probabilities[64];
  std::snprintf(probabilities, sizeof(probabilities), "per-group probability %.2f -> %.2f",
                w["probability_before"].get<double>(), w["probability_after"].get<double>());
  const std::string imitated = " in " + std::to_string(w["steps"].get<int64_t>()) + " steps; " + probabilities;
  auto time_of = [&](const char* key) { return w[key].is_number() ? " (" + seconds(w[key]) + ")" : std::string(); };
  if (w.contains("search_evaluations"))
    return "searched " + std::to_string(w["search_evaluations"].get<int64_t>()) + " simulated placements" +
           (w.value("search_ensemble", 0) > 0 ? " (each also on " + std::to_string(w.value("search_ensemble", 0)) +
                                                    " perturbed copies of the model)"
                                              : std::string()) +
           " from " +
           w["search_start"].get<std::string>() + time_of("search_start_step_time_s") + " to one" +
           time_of("baseline_step_time_s") + " on the planning model, imitated" + imitated;
  return "imitated " + w["baseline"].get<std::string>() + time_of("baseline_step_time_s") + imitated;
}

int status(const Globals& g) {
  const json s = ask(g, MessageType::kStatus, json::object(), MessageType::kStatusReply);
  if (g.json) {
    std::cout << s.dump(2) << "\n";
    return 0;
  }
  Table t({"placementd", s["version"].get<std::string>()});
  t.add({"pid", std::to_string(s["pid"].get<int64_t>())});
  t.add({"uptime", seconds(s["uptime_s"])});
  t.add({"socket", s["socket"].get<std::string>()});
  t.add({"config", s["config"].get<std::string>()});
  t.add({"state dir", s["state_dir"].get<std::string>()});
  t.add({"policy", s["policy"]["grouper"].get<std::string>() + " / " + s["policy"]["placer"].get<std::string>() +
                       " / " + s["policy"]["algorithm"].get<std::string>()});
  t.add({"jobs (yours)", std::to_string(s["jobs_visible"].get<uint64_t>())});
  if (s["jobs_total"].is_number()) t.add({"jobs (all)", std::to_string(s["jobs_total"].get<uint64_t>())});
  t.add({"connections", std::to_string(s["connections"].get<uint64_t>()) + " open, " +
                            std::to_string(s["connections_total"].get<uint64_t>()) + " since start"});
  t.add({"step reports", std::to_string(s["reports_received"].get<uint64_t>())});
  t.add({"protocol errors", std::to_string(s["protocol_errors"].get<uint64_t>())});
  t.add({"plugins", std::to_string(s["plugins"]["grouper"].get<int>()) + " groupers, " +
                        std::to_string(s["plugins"]["placer"].get<int>()) + " placers, " +
                        std::to_string(s["plugins"]["algorithm"].get<int>()) + " algorithms, " +
                        std::to_string(s["plugins_skipped"].get<uint64_t>()) + " skipped"});
  t.align_numbers(false);
  t.print(std::cout);
  return 0;
}

int jobs(const Globals& g, bool all, bool finished) {
  const json list = ask(g, msg::ListJobs::kType, msg::ListJobs{all, finished}.to_json(), MessageType::kJobList);
  if (g.json) {
    std::cout << list["jobs"].dump(2) << "\n";
    return 0;
  }
  if (list["jobs"].empty()) {
    std::cout << "no jobs attached\n";
    return 0;
  }
  Table t({"ID", "NAME", "UID", "STATE", "STEPS", "CANDIDATES", "START", "BEST", "SPEEDUP", "OVERHEAD", "BUDGET"});
  for (const json& j : list["jobs"]) {
    t.add({std::to_string(j["id"].get<uint64_t>()), j["name"].get<std::string>(), std::to_string(j["uid"].get<uint64_t>()),
           state_of(j), std::to_string(j["steps"].get<uint64_t>()),
           std::to_string(j["candidates_tried"].get<uint64_t>()), seconds(j["start_step_time_s"]),
           seconds(j["best_step_time_s"]), speedup(j), format_percent(j["exploration_overhead"].get<double>()),
           progress_bar(j["budget_used"].get<double>(), 10)});
  }
  t.print(std::cout);
  return 0;
}

int job_show(const Globals& g, uint64_t id, const std::string& plot_path) {
  const json j = ask(g, msg::JobShow::kType, msg::JobShow{id}.to_json(), MessageType::kJobInfo);
  if (g.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  Table head({"job " + std::to_string(id), j["name"].get<std::string>()});
  head.add({"state", state_of(j)});
  head.add({"uid / pid", std::to_string(j["uid"].get<uint64_t>()) + " / " + std::to_string(j["pid"].get<int64_t>())});
  head.add({"graph", j["fingerprint"].get<std::string>() + " (" + std::to_string(j["ops"].get<uint64_t>()) + " ops, " +
                         std::to_string(j["groups"].get<int64_t>()) + " groups)"});
  head.add({"policy", j["grouper"].get<std::string>() + " / " + j["placer"].get<std::string>() + " / " +
                          j["algorithm"].get<std::string>()});
  if (const json& w = j.value("warm_start", json()); w.is_object()) head.add({"warm start", describe_warm_start(w)});
  if (const json& e = j.value("policy_error", json()); e.is_string())
    head.add({"plugin failure", e.get<std::string>() + "; exploration ended, the job keeps its best placement"});
  std::string kinds;
  for (const json& k : j.value("profiled_kinds", json::array())) kinds += (kinds.empty() ? "" : ", ") + k.get<std::string>();
  // Profiling the start costs what it took beyond the start's own step time; on an exploration
  // candidate it is part of that candidate's exploration time.
  const double profiling_s = j.value("profiling_overhead_s", 0.0);
  head.add({"profiles", kinds.empty() ? std::string("none (the simulator cannot time placements)")
                                      : kinds + " (" + std::to_string(j.value("profile_reports", 0)) + " sent by the job, " +
                                            std::to_string(j.value("profiled_steps", 0)) + " profiled steps" +
                                            (profiling_s > 0 ? ", " + seconds(json(profiling_s)) + " of overhead" : "") + ")"});
  head.add({"steps", std::to_string(j["steps"].get<uint64_t>()) + " (" + std::to_string(j["failed_steps"].get<uint64_t>()) + " failed)"});
  head.add({"start / best", seconds(j["start_step_time_s"]) + " / " + seconds(j["best_step_time_s"]) + " (" + speedup(j) + ")"});
  head.add({"exploration overhead", format_percent(j["exploration_overhead"].get<double>())});
  const uint64_t expected = j["expected_steps"].get<uint64_t>();
  head.add({"exploration", std::to_string(j["exploration_steps"].get<uint64_t>()) + " steps" +
                               (expected ? " of " + std::to_string(expected) + " expected" : std::string()) + ", budget " +
                               progress_bar(j["budget_used"].get<double>(), 20)});
  head.add({"candidates", std::to_string(j["candidates_tried"].get<uint64_t>()) + " run, " +
                              std::to_string(j["rejected"].get<uint64_t>()) + " rejected by the memory model, " +
                              std::to_string(j["repeats_scored"].get<uint64_t>()) + " repeats scored, " +
                              std::to_string(j["reexplorations"].get<uint64_t>()) + " re-explorations"});
  head.align_numbers(false);
  head.print(std::cout);
  std::cout << "\n";
  Table t({"CANDIDATE", "REASON", "STEPS", "FAILED", "MEDIAN", "OPS PER DEVICE"});
  for (const json& c : j["candidates"]) {
    std::string spread;
    const auto& names = j["device_names"];
    for (size_t d = 0; d < c["ops_per_device"].size(); ++d)
      spread += (spread.empty() ? "" : " ") + names[d].get<std::string>() + "=" + std::to_string(c["ops_per_device"][d].get<int>());
    t.add({std::to_string(c["id"].get<uint64_t>()), c["reason"].get<std::string>(), std::to_string(c["steps"].get<uint64_t>()),
           std::to_string(c["failures"].get<uint64_t>()), seconds(c["median_step_time_s"]), spread});
  }
  t.print(std::cout);
  if (!plot_path.empty()) {
    CurvePlot plot;
    plot.title = "job " + std::to_string(id) + " '" + j["name"].get<std::string>() + "': median step time per candidate";
    std::optional<double> best;
    for (const json& c : j["candidates"]) {
      std::optional<double> median;
      if (c["median_step_time_s"].is_number() && c["failures"].get<uint64_t>() == 0) median = c["median_step_time_s"].get<double>();
      if (median && (!best || *median < *best)) best = median;
      plot.samples.push_back(median);
      plot.best.push_back(best);
    }
    if (!j["start_step_time_s"].is_null()) plot.references.emplace_back("start", j["start_step_time_s"].get<double>());
    write_curve_svg(plot_path, plot);
    std::cout << "\nlearning curve written to " << plot_path << "\n";
  }
  return 0;
}

int plugins(const Globals& g) {
  const json list = ask(g, MessageType::kListPlugins, json::object(), MessageType::kPluginList);
  if (g.json) {
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  Table t({"KIND", "NAME", "VERSION", "HYPERPARAMETERS", "SUMMARY"});
  for (const json& p : list["plugins"]) {
    std::string params;
    for (const json& h : p["hyperparameters"])
      params += (params.empty() ? "" : ", ") + h["name"].get<std::string>() + "=" + h["default"].get<std::string>();
    t.add({p["kind"].get<std::string>(), p["name"].get<std::string>(), p["version"].get<std::string>(),
           params.empty() ? "-" : params, p["summary"].get<std::string>()});
  }
  t.print(std::cout);
  if (!list["skipped"].empty()) {
    std::cout << "\nskipped:\n";
    Table s({"FILE", "REASON"});
    for (const json& p : list["skipped"]) s.add({p["file"].get<std::string>(), p["reason"].get<std::string>()});
    s.print(std::cout);
  }
  return 0;
}

int reload(const Globals& g) {
  const json r = ask(g, msg::Reload::kType, msg::Reload{}.to_json(), msg::Reloaded::kType);
  const msg::Reloaded reloaded = msg::Reloaded::from_json(r);
  if (g.json) std::cout << r.dump(2) << "\n";
  else std::cout << "reloaded " << reloaded.config << " (" << reloaded.plugins << " plugins)\n";
  return 0;
}

int config_check(const Globals& g, const std::string& file) {
  placementd::PluginRegistry registry;
  const auto errors = placementd::check_config_file(file, placementd::default_plugin_dir(), registry);
  if (g.json) {
    std::cout << json{{"file", file}, {"ok", errors.empty()}, {"errors", errors}}.dump(2) << "\n";
  } else if (errors.empty()) {
    std::cout << file << ": OK (" << registry.plugins().size() << " plugins)\n";
  } else {
    for (const auto& e : errors) std::cerr << e << "\n";
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace placementctl
