#include "commands.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "config/config_check.h"
#include "config/paths.h"
#include "placement/client.h"
#include "placement/inspection.h"
#include "placement/job_outcome.h"
#include "table.h"
#include "timeline_plot.h"

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
std::string state_of(const msg::JobSummary& job) {
  std::string state = msg::to_string(job.state);
  if (job.paused) state += " (paused)";
  if (job.policy_error) state += " (plugin failed)";
  return state;
}

std::string seconds(std::optional<double> value) { return format_seconds(value); }

// "1/4 10.0.0.1:29500/3fa2c1d0": rank/world size and group; "-" for a job of one process.
std::string replica_of(const msg::JobSummary& job) {
  if (!job.replica) return "-";
  return std::to_string(job.replica->rank) + "/" + std::to_string(job.replica->world_size) + " " +
         job.replica->group;
}

// A time in the warm start's report (planning's own JSON).
std::string json_seconds(const json& value) {
  return seconds(value.is_number() ? std::optional<double>(value.get<double>()) : std::nullopt);
}

// "73.1 ms ± 0.8 ms": a median and the larger half-width of its 95% interval.
std::string with_interval(std::optional<double> median,
                          const std::optional<std::array<double, 2>>& interval) {
  if (!median || !interval) return seconds(median);
  const double half = std::max(*median - (*interval)[0], (*interval)[1] - *median);
  return seconds(median) + " ± " + seconds(half);
}

// "1.10x"; "-" before it is measured.
std::string ratio(std::optional<double> value) {
  if (!value) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", *value);
  return buf;
}

}  // namespace

namespace {

std::string time_of(const json& w, const char* key) {
  return w.contains(key) && w[key].is_number() ? " (" + json_seconds(w[key]) + ")" : std::string();
}

// "searched 20000 simulated placements (each also on 4 perturbed copies of the model) from metis
// (9.1 ms) to one (8.4 ms)": a simulator search's report.
std::string describe_search(const json& w) {
  const int64_t ensemble = w.value("search_ensemble", int64_t{0});
  return "searched " + std::to_string(w.value("search_evaluations", int64_t{0})) +
         " simulated placements" +
         (ensemble > 0
              ? " (each also on " + std::to_string(ensemble) +
                    (ensemble == 1 ? " perturbed copy" : " perturbed copies") + " of the model)"
              : std::string()) +
         " from " + w.value("search_start", std::string()) +
         time_of(w, "search_start_step_time_s") + " to one" + time_of(w, "baseline_step_time_s");
}

// " in 12 steps; per-group probability 0.50 -> 0.94": what the imitation did.
std::string describe_imitation(const json& w) {
  char probabilities[64];
  std::snprintf(probabilities, sizeof(probabilities), "per-group probability %.2f -> %.2f",
                w.value("probability_before", 0.0), w.value("probability_after", 0.0));
  return " in " + std::to_string(w.value("steps", int64_t{0})) + " steps; " + probabilities;
}

}  // namespace

std::string describe_warm_start(const json& w) {
  if (!w["skipped"].is_null()) return "skipped: " + w["skipped"].get<std::string>();
  if (w.contains("search_evaluations"))
    return describe_search(w) + " on the planning model, imitated" + describe_imitation(w);
  return "imitated " + w.value("baseline", std::string()) + time_of(w, "baseline_step_time_s") +
         describe_imitation(w);
}

namespace {

// "expert: candidate 4, predicted 8.5 ms; list_scheduling: not offered, the planning model
// predicts 1.84x the warm start's answer": the heuristics' placements a live warm start offered.
std::string describe_heuristics(const json& heuristics) {
  std::string out;
  for (const json& h : heuristics) {
    if (!h.is_object()) continue;
    out += (out.empty() ? "" : "; ") + h.value("placer", std::string()) + ": ";
    if (h.contains("not_offered") && h["not_offered"].is_string()) {
      out += "not offered, " + h["not_offered"].get<std::string>();
      continue;
    }
    out += h.contains("candidate") && h["candidate"].is_number_unsigned()
               ? "candidate " + std::to_string(h["candidate"].get<uint64_t>())
               : std::string("not run yet");
    if (h.contains("predicted_step_time_s") && h["predicted_step_time_s"].is_number())
      out += ", predicted " + json_seconds(h["predicted_step_time_s"]);
  }
  return out;
}

// "to 6 measured placements: log error 0.410 -> 0.050 (aten::_convolution on cpu x3.10, ...,
// cuda:0 and cuda:1 take turns);
// searched ... on the refitted model, imitated ..." (or "; not offered: its answer ran already").
std::string describe_refit(const json& r) {
  const std::string placements =
      "to " + std::to_string(r.value("measured", 0)) + " measured placements: ";
  const std::string skipped = r.contains("skipped") && r["skipped"].is_string()
                                  ? r["skipped"].get<std::string>()
                                  : std::string();
  if (!r.contains("log_error_before")) return placements + "not refitted: " + skipped;
  char errors[96];
  std::snprintf(errors, sizeof(errors), "log error %.3f -> %.3f", r.value("log_error_before", 0.0),
                r.value("log_error_after", 0.0));
  std::string factors;
  const json moved = r.value("factors", json::array());
  for (size_t i = 0; i < moved.size() && i < 3; ++i) {
    char f[160];
    std::snprintf(f, sizeof(f), "%s%s x%.2f", i ? ", " : "",
                  moved[i].value("what", std::string()).c_str(), moved[i].value("scale", 1.0));
    factors += f;
  }
  if (moved.size() > 3) factors += " and " + std::to_string(moved.size() - 3) + " more";
  for (const json& pair : r.value("shared", json::array()))
    if (pair.is_string())
      factors += (factors.empty() ? "" : ", ") + pair.get<std::string>() + " take turns";
  const std::string fit = placements + errors +
                          (r.value("fit_timed_out", false) ? ", out of time" : "") + " (" +
                          (factors.empty() ? std::string("no factor moved") : factors) + "); ";
  if (!r.contains("search_evaluations")) return fit + "skipped: " + skipped;
  return fit + describe_search(r) + " on the refitted model" +
         (skipped.empty() ? ", imitated" + describe_imitation(r) : "; not offered: " + skipped);
}

}  // namespace

int status(const Globals& g) {
  const json reply = ask(g, MessageType::kStatus, json::object(), MessageType::kStatusReply);
  if (g.json) {
    std::cout << reply.dump(2) << "\n";
    return 0;
  }
  const msg::StatusReply s = msg::StatusReply::from_json(reply);
  Table t({"placementd", s.version});
  t.add({"pid", std::to_string(s.pid)});
  t.add({"uptime", seconds(s.uptime_s)});
  t.add({"socket", s.socket});
  t.add({"config", s.config});
  t.add({"state dir", s.state_dir});
  t.add({"policy", s.policy.grouper + " / " + s.policy.placer + " / " + s.policy.algorithm});
  t.add({"jobs (yours)", std::to_string(s.jobs_visible)});
  if (s.jobs_total) t.add({"jobs (all)", std::to_string(*s.jobs_total)});
  t.add({"connections", std::to_string(s.connections) + " open, " +
                            std::to_string(s.connections_total) + " since start"});
  t.add({"step reports", std::to_string(s.reports_received)});
  t.add({"protocol errors", std::to_string(s.protocol_errors)});
  t.add({"plugins", std::to_string(s.plugins.grouper) + " groupers, " +
                        std::to_string(s.plugins.placer) + " placers, " +
                        std::to_string(s.plugins.algorithm) + " algorithms, " +
                        std::to_string(s.plugins_skipped) + " skipped"});
  t.align_numbers(false);
  t.print(std::cout);
  return 0;
}

int jobs(const Globals& g, bool all, bool finished) {
  const json reply =
      ask(g, msg::ListJobs::kType, msg::ListJobs{all, finished}.to_json(), MessageType::kJobList);
  if (g.json) {
    std::cout << reply["jobs"].dump(2) << "\n";
    return 0;
  }
  const msg::JobList list = msg::JobList::from_json(reply);
  if (list.jobs.empty()) {
    std::cout << "no jobs attached\n";
    return 0;
  }
  Table t({"ID", "NAME", "UID", "STATE", "STEPS", "CANDIDATES", "START", "BEST", "SPEEDUP",
           "REALIZED", "BUDGET", "REPLICA"});
  for (const msg::JobSummary& j : list.jobs) {
    // A follower runs rank 0's placement: its own figures are its steps and its step time.
    if (j.replica && j.replica->follower()) {
      t.add({std::to_string(j.id), j.name, std::to_string(j.uid), state_of(j),
             std::to_string(j.steps), "-", "-", seconds(j.current_step_time_s), "-", "-", "-",
             replica_of(j)});
      continue;
    }
    t.add({std::to_string(j.id), j.name, std::to_string(j.uid), state_of(j),
           std::to_string(j.steps), std::to_string(j.candidates_tried),
           seconds(j.start_step_time_s), seconds(j.best_step_time_s), ratio(j.speedup),
           ratio(j.realized_speedup), progress_bar(j.budget_used, 10), replica_of(j)});
  }
  t.print(std::cout);
  return 0;
}

int job_show(const Globals& g, uint64_t id, const std::string& plot_path) {
  const json reply = ask(g, msg::JobShow::kType, msg::JobShow{id}.to_json(), MessageType::kJobInfo);
  if (g.json) {
    std::cout << reply.dump(2) << "\n";
    return 0;
  }
  const msg::JobInfo info = msg::JobInfo::from_json(reply);
  const msg::JobSummary& j = info.job;
  Table head({"job " + std::to_string(id), j.name});
  head.add({"state", state_of(j)});
  head.add({"uid / pid", std::to_string(j.uid) + " / " + std::to_string(j.pid)});
  if (j.replica) {
    const msg::ReplicaInfo& r = *j.replica;
    head.add({"replica", "rank " + std::to_string(r.rank) + " of " + std::to_string(r.world_size) +
                             " in group " + r.group +
                             (r.follower() ? ": runs the placement rank 0's daemon decides"
                                           : ": its placements hold for every rank")});
    if (r.follower()) {
      head.add(
          {"steps", std::to_string(j.steps) + " (" + std::to_string(j.failed_steps) + " failed)"});
      head.add({"step time", seconds(j.current_step_time_s) + " (median of the latest 64)"});
      head.align_numbers(false);
      head.print(std::cout);
      return 0;
    }
  }
  head.add({"graph", j.fingerprint + " (" + std::to_string(j.ops) + " ops, " +
                         std::to_string(j.groups) + " groups)"});
  head.add({"policy", j.grouper + " / " + j.placer + " / " + j.algorithm});
  if (info.warm_start.is_object()) {
    head.add({"warm start", describe_warm_start(info.warm_start)});
    if (const std::string h =
            describe_heuristics(info.warm_start.value("heuristics", json::array()));
        !h.empty())
      head.add({"heuristics", h});
  }
  for (size_t i = 0; i < info.refits.size(); ++i)
    head.add({"refit " + std::to_string(i + 1), describe_refit(info.refits[i])});
  if (j.policy_error)
    head.add({"plugin failure",
              *j.policy_error + "; exploration ended, the job keeps its best placement"});
  std::string kinds;
  for (const std::string& k : j.profiled_kinds) kinds += (kinds.empty() ? "" : ", ") + k;
  // Profiling the start costs what it took beyond the start's own step time; on an exploration
  // candidate it is part of that candidate's exploration time.
  const double profiling_s = j.profiling_overhead_s;
  head.add(
      {"profiles",
       kinds.empty()
           ? std::string("none (the simulator cannot time placements)")
           : kinds + " (" + std::to_string(info.profile_reports) + " sent by the job, " +
                 (info.profile_reports_dropped > 0 ? std::to_string(info.profile_reports_dropped) +
                                                         " more not asked for and dropped, "
                                                   : std::string()) +
                 std::to_string(j.profiled_steps) + " profiled steps" +
                 (profiling_s > 0 ? ", " + seconds(profiling_s) + " of overhead" : "") + ")"});
  head.add({"steps", std::to_string(j.steps) + " (" + std::to_string(j.failed_steps) + " failed)"});
  // The best is the placement in force: only an A/B trial puts a candidate there.
  head.add({"start / best", with_interval(j.start_step_time_s, j.start_step_time_interval_s) +
                                " / " +
                                with_interval(j.best_step_time_s, j.best_step_time_interval_s) +
                                " (" + ratio(j.speedup) + ")"});
  for (auto& [label, value] : placement::describe_outcome(j)) head.add({label, value});
  head.add({"exploration budget",
            std::to_string(j.exploration_steps) + " steps" +
                (j.expected_steps ? " of " + std::to_string(j.expected_steps) + " expected"
                                  : std::string()) +
                ", budget " + progress_bar(j.budget_used, 20)});
  head.add({"candidates", std::to_string(j.candidates_tried) + " run, " +
                              std::to_string(j.rejected) + " rejected by the memory model, " +
                              std::to_string(j.repeats_scored) + " repeats scored, " +
                              std::to_string(j.reexplorations) + " re-explorations"});
  head.align_numbers(false);
  head.print(std::cout);
  std::cout << "\n";
  Table t({"CANDIDATE", "REASON", "STEPS", "FAILED", "MEDIAN", "OPS PER DEVICE", "TRIAL"});
  for (const msg::CandidateInfo& c : info.candidates) {
    std::string spread;
    for (size_t d = 0; d < c.ops_per_device.size() && d < info.device_names.size(); ++d)
      spread += (spread.empty() ? "" : " ") + info.device_names[d] + "=" +
                std::to_string(c.ops_per_device[d]);
    t.add({std::to_string(c.id), msg::to_string(c.reason), std::to_string(c.steps),
           std::to_string(c.failures), seconds(c.median_step_time_s), spread,
           c.trial ? *c.trial : "-"});
  }
  t.print(std::cout);
  // What the job measured of its memory under the placements it profiled, device by device: the
  // peak of the forward and backward, and what lived there by kind (docs/live.md).
  Table memory({"CANDIDATE", "DEVICE", "MEASURED PEAK", "PARAMETERS", "BUFFERS", "GRADIENTS",
                "OPTIMIZER STATE", "COPIES", "ACTIVATIONS"});
  const auto bytes = [](uint64_t b) { return b ? format_bytes(b) : std::string("-"); };
  for (const msg::CandidateInfo& c : info.candidates) {
    const size_t devices =
        std::min(std::max(c.peak_bytes.size(), c.held_bytes.size()), info.device_names.size());
    for (size_t d = 0; d < devices; ++d) {
      std::vector<std::string> row = {std::to_string(c.id), info.device_names[d],
                                      bytes(d < c.peak_bytes.size() ? c.peak_bytes[d] : 0)};
      if (d < c.held_bytes.size()) {
        const msg::HeldBytes& h = c.held_bytes[d];
        for (uint64_t b :
             {h.parameters, h.buffers, h.gradients, h.optimizer_state, h.copies, h.activations})
          row.push_back(bytes(b));
      } else {
        row.insert(row.end(), 6, "-");
      }
      memory.add(row);
    }
  }
  if (!memory.empty()) {
    std::cout << "\n";
    memory.print(std::cout);
  }
  if (!plot_path.empty()) {
    write_timeline_svg(plot_path, info);
    std::cout << "\nstep times over the job written to " << plot_path << "\n";
  }
  return 0;
}

int plugins(const Globals& g) {
  const json reply = ask(g, MessageType::kListPlugins, json::object(), MessageType::kPluginList);
  if (g.json) {
    std::cout << reply.dump(2) << "\n";
    return 0;
  }
  const msg::PluginList list = msg::PluginList::from_json(reply);
  Table t({"KIND", "NAME", "VERSION", "HYPERPARAMETERS", "SUMMARY"});
  for (const auto& p : list.plugins) {
    std::string params;
    for (const auto& h : p.hyperparameters)
      params += (params.empty() ? "" : ", ") + h.name + "=" + h.default_value;
    t.add({p.kind, p.name, p.version, params.empty() ? "-" : params, p.summary});
  }
  t.print(std::cout);
  if (!list.skipped.empty()) {
    std::cout << "\nskipped:\n";
    Table s({"FILE", "REASON"});
    for (const auto& p : list.skipped) s.add({p.file, p.reason});
    s.print(std::cout);
  }
  return 0;
}

int reload(const Globals& g) {
  const json r = ask(g, msg::Reload::kType, msg::Reload{}.to_json(), msg::Reloaded::kType);
  const msg::Reloaded reloaded = msg::Reloaded::from_json(r);
  if (g.json)
    std::cout << r.dump(2) << "\n";
  else
    std::cout << "reloaded " << reloaded.config << " (" << reloaded.plugins << " plugins)\n";
  return 0;
}

int config_check(const Globals& g, const std::string& file) {
  placementd::PluginRegistry registry;
  const auto errors =
      placementd::check_config_file(file, placementd::default_plugin_dir(), registry);
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
