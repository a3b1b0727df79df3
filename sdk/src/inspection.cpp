#include "placement/inspection.h"

#include "json_reader.h"
#include "message_fields.h"

namespace placement::messages {

using detail::JsonReader;
using nlohmann::json;
using namespace fields;

namespace {

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// Absent keys keep the default: a newer daemon may drop nothing, an older one may lack a key.
uint64_t count(const JsonReader& r, const char* key) {
  return r.has(key) ? r.field(key).uint() : 0;
}
int64_t integer(const JsonReader& r, const char* key) {
  return r.has(key) ? r.field(key).integer() : 0;
}
double number(const JsonReader& r, const char* key) {
  return r.has(key) ? r.field(key).number() : 0.0;
}

std::optional<double> maybe_number(const JsonReader& r, const char* key) {
  if (!r.has(key) || r.value().at(key).is_null()) return std::nullopt;
  return r.field(key).number();
}
std::optional<uint64_t> maybe_count(const JsonReader& r, const char* key) {
  if (!r.has(key) || r.value().at(key).is_null()) return std::nullopt;
  return r.field(key).uint();
}
std::optional<std::string> maybe_text(const JsonReader& r, const char* key) {
  if (!r.has(key) || r.value().at(key).is_null()) return std::nullopt;
  return r.field(key).string();
}

// [low, high], or nullopt when absent or null.
std::optional<std::array<double, 2>> maybe_interval(const JsonReader& r, const char* key) {
  if (!r.has(key) || r.value().at(key).is_null()) return std::nullopt;
  const JsonReader a = r.field(key);
  if (a.array_size() != 2) a.fail("must be [low, high]");
  return std::array<double, 2>{a.element(0).number(), a.element(1).number()};
}

// Each element of the array at `key` (none when absent), decoded by `decode`.
template <typename T, typename F>
std::vector<T> list(const JsonReader& r, const char* key, F&& decode) {
  std::vector<T> out;
  if (!r.has(key)) return out;
  const JsonReader a = r.field(key);
  for (size_t i = 0; i < a.array_size(); ++i) out.push_back(decode(a.element(i)));
  return out;
}

std::vector<std::string> strings(const JsonReader& r, const char* key) {
  return list<std::string>(r, key, [](const JsonReader& e) { return e.string(); });
}

void summary_to_json(const JobSummary& s, json& j) {
  j["id"] = s.id;
  j["name"] = s.name;
  j["uid"] = s.uid;
  j["pid"] = s.pid;
  j["state"] = to_string(s.state);
  j["fingerprint"] = s.fingerprint;
  j["ops"] = s.ops;
  j["groups"] = s.groups;
  j["devices"] = s.devices;
  j["grouper"] = s.grouper;
  j["placer"] = s.placer;
  j["algorithm"] = s.algorithm;
  j["steps"] = s.steps;
  j["failed_steps"] = s.failed_steps;
  j["candidates_tried"] = s.candidates_tried;
  j["max_candidates"] = s.max_candidates;
  j["start_step_time_s"] = or_null(s.start_step_time_s);
  j["current_step_time_s"] = or_null(s.current_step_time_s);
  j["best_step_time_s"] = or_null(s.best_step_time_s);
  j["start_step_time_interval_s"] = or_null(s.start_step_time_interval_s);
  j["best_step_time_interval_s"] = or_null(s.best_step_time_interval_s);
  j["exploration_overhead"] = s.exploration_overhead;
  j["job_s"] = s.job_s;
  j["realized_speedup"] = or_null(s.realized_speedup);
  j["realized_speedup_interval"] = or_null(s.realized_speedup_interval);
  j["start_mean_step_time_s"] = or_null(s.start_mean_step_time_s);
  j["beyond_best_s"] = or_null(s.beyond_best_s);
  j["current_placement"] = s.current_placement;
  j["best_placement"] = s.best_placement;
  j["on_best"] = s.on_best;
  j["exploration_finished"] = s.exploration_finished;
  j["exploration_steps"] = s.exploration_steps;
  j["expected_steps"] = s.expected_steps;
  j["budget_used"] = s.budget_used;
  j["paused"] = s.paused;
  j["speedup"] = or_null(s.speedup);
  j["steps_to_within_2pct"] = or_null(s.steps_to_within_2pct);
  j["seconds_to_within_2pct"] = or_null(s.seconds_to_within_2pct);
  j["rejected"] = s.rejected;
  j["repeats_scored"] = s.repeats_scored;
  j["reexplorations"] = s.reexplorations;
  j["profiled_kinds"] = s.profiled_kinds;
  j["profiled_steps"] = s.profiled_steps;
  j["profiling_overhead_s"] = s.profiling_overhead_s;
  j["policy_error"] = or_null(s.policy_error);
  j["attached_s"] = s.attached_s;
  j["replica"] = s.replica ? s.replica->to_json() : json();
}

JobSummary summary_from(const JsonReader& r) {
  JobSummary s;
  s.id = r.field("id").uint();
  s.name = text(r, "name");
  s.uid = count(r, "uid");
  s.pid = integer(r, "pid");
  s.state = state_from_string(r.field("state"));
  s.fingerprint = text(r, "fingerprint");
  s.ops = count(r, "ops");
  s.groups = integer(r, "groups");
  s.devices = count(r, "devices");
  s.grouper = text(r, "grouper");
  s.placer = text(r, "placer");
  s.algorithm = text(r, "algorithm");
  s.steps = count(r, "steps");
  s.failed_steps = count(r, "failed_steps");
  s.candidates_tried = count(r, "candidates_tried");
  s.max_candidates = integer(r, "max_candidates");
  s.start_step_time_s = maybe_number(r, "start_step_time_s");
  s.current_step_time_s = maybe_number(r, "current_step_time_s");
  s.best_step_time_s = maybe_number(r, "best_step_time_s");
  s.start_step_time_interval_s = maybe_interval(r, "start_step_time_interval_s");
  s.best_step_time_interval_s = maybe_interval(r, "best_step_time_interval_s");
  s.exploration_overhead = number(r, "exploration_overhead");
  s.job_s = number(r, "job_s");
  s.realized_speedup = maybe_number(r, "realized_speedup");
  s.realized_speedup_interval = maybe_interval(r, "realized_speedup_interval");
  s.start_mean_step_time_s = maybe_number(r, "start_mean_step_time_s");
  s.beyond_best_s = maybe_number(r, "beyond_best_s");
  s.current_placement = count(r, "current_placement");
  s.best_placement = count(r, "best_placement");
  s.on_best = flag(r, "on_best");
  s.exploration_finished = flag(r, "exploration_finished");
  s.exploration_steps = count(r, "exploration_steps");
  s.expected_steps = count(r, "expected_steps");
  s.budget_used = number(r, "budget_used");
  s.paused = flag(r, "paused");
  s.speedup = maybe_number(r, "speedup");
  s.steps_to_within_2pct = maybe_count(r, "steps_to_within_2pct");
  s.seconds_to_within_2pct = maybe_number(r, "seconds_to_within_2pct");
  s.rejected = count(r, "rejected");
  s.repeats_scored = count(r, "repeats_scored");
  s.reexplorations = count(r, "reexplorations");
  s.profiled_kinds = strings(r, "profiled_kinds");
  s.profiled_steps = count(r, "profiled_steps");
  s.profiling_overhead_s = number(r, "profiling_overhead_s");
  s.policy_error = maybe_text(r, "policy_error");
  s.attached_s = number(r, "attached_s");
  if (r.has("replica") && !r.value().at("replica").is_null())
    s.replica = replica_from(r.field("replica"));
  return s;
}

CandidateInfo candidate_from(const JsonReader& r) {
  CandidateInfo c;
  c.id = r.field("id").uint();
  const JsonReader reason = r.field("reason");
  c.reason = nested(reason, [&](const json&) { return reason_from_string(reason.string()); });
  c.stale = flag(r, "stale");
  c.placement_fingerprint = text(r, "placement_fingerprint");
  c.ops_per_device =
      list<int64_t>(r, "ops_per_device", [](const JsonReader& e) { return e.integer(); });
  c.steps = count(r, "steps");
  c.failures = count(r, "failures");
  c.error = maybe_text(r, "error");
  c.median_step_time_s = maybe_number(r, "median_step_time_s");
  c.trial = maybe_text(r, "trial");
  return c;
}

TrialMark mark_from(const JsonReader& r) {
  TrialMark m;
  m.candidate = count(r, "candidate");
  m.against = count(r, "against");
  m.step = count(r, "step");
  m.verdict = text(r, "verdict");
  m.final_check = flag(r, "final_check");
  return m;
}

TimelinePoint point_from(const JsonReader& r) {
  TimelinePoint p;
  p.first_step = count(r, "first_step");
  p.steps = count(r, "steps");
  p.placement = count(r, "placement");
  p.best = count(r, "best");
  p.mean_step_time_s = number(r, "mean_step_time_s");
  return p;
}

}  // namespace

json StatusReply::to_json() const {
  return {
      {"version", version},
      {"pid", pid},
      {"uptime_s", uptime_s},
      {"config", config},
      {"socket", socket},
      {"state_dir", state_dir},
      {"store_failed_writes", store_failed_writes},
      {"jobs_visible", jobs_visible},
      {"jobs_total", or_null(jobs_total)},
      {"connections", connections},
      {"connections_total", connections_total},
      {"frames_received", frames_received},
      {"reports_received", reports_received},
      {"protocol_errors", protocol_errors},
      {"plugins",
       {{"grouper", plugins.grouper},
        {"placer", plugins.placer},
        {"algorithm", plugins.algorithm}}},
      {"plugins_skipped", plugins_skipped},
      {"policy",
       {{"grouper", policy.grouper}, {"placer", policy.placer}, {"algorithm", policy.algorithm}}},
      {"peer", {{"uid", peer_uid}, {"admin", peer_admin}}}};
}

StatusReply StatusReply::from_json(const json& body) {
  const JsonReader r = body_of(body, "status_reply");
  StatusReply s;
  s.version = text(r, "version");
  s.pid = integer(r, "pid");
  s.uptime_s = number(r, "uptime_s");
  s.config = text(r, "config");
  s.socket = text(r, "socket");
  s.state_dir = text(r, "state_dir");
  s.store_failed_writes = count(r, "store_failed_writes");
  s.jobs_visible = count(r, "jobs_visible");
  s.jobs_total = maybe_count(r, "jobs_total");
  s.connections = count(r, "connections");
  s.connections_total = count(r, "connections_total");
  s.frames_received = count(r, "frames_received");
  s.reports_received = count(r, "reports_received");
  s.protocol_errors = count(r, "protocol_errors");
  if (r.has("plugins")) {
    const JsonReader p = r.field("plugins");
    s.plugins = {count(p, "grouper"), count(p, "placer"), count(p, "algorithm")};
  }
  s.plugins_skipped = count(r, "plugins_skipped");
  if (r.has("policy")) {
    const JsonReader p = r.field("policy");
    s.policy = {text(p, "grouper"), text(p, "placer"), text(p, "algorithm")};
  }
  if (r.has("peer")) {
    const JsonReader p = r.field("peer");
    s.peer_uid = count(p, "uid");
    s.peer_admin = flag(p, "admin");
  }
  return s;
}

json JobSummary::to_json() const {
  json j = json::object();
  summary_to_json(*this, j);
  return j;
}

JobSummary JobSummary::from_json(const json& body) { return summary_from(body_of(body, "job")); }

json JobList::to_json() const {
  json list = json::array();
  for (const JobSummary& s : jobs) list.push_back(s.to_json());
  return {{"jobs", list}};
}

JobList JobList::from_json(const json& body) {
  const JsonReader r = body_of(body, "job_list");
  return {list<JobSummary>(r, "jobs", summary_from)};
}

json CandidateInfo::to_json() const {
  return {{"id", id},
          {"reason", to_string(reason)},
          {"stale", stale},
          {"placement_fingerprint", placement_fingerprint},
          {"ops_per_device", ops_per_device},
          {"steps", steps},
          {"failures", failures},
          {"error", or_null(error)},
          {"median_step_time_s", or_null(median_step_time_s)},
          {"trial", or_null(trial)}};
}

CandidateInfo CandidateInfo::from_json(const json& body) {
  return candidate_from(body_of(body, "candidate"));
}

json TimelinePoint::to_json() const {
  return {{"first_step", first_step},
          {"steps", steps},
          {"placement", placement},
          {"best", best},
          {"mean_step_time_s", mean_step_time_s}};
}

TimelinePoint TimelinePoint::from_json(const json& body) {
  return point_from(body_of(body, "timeline point"));
}

json TrialMark::to_json() const {
  return {{"candidate", candidate},
          {"against", against},
          {"step", step},
          {"verdict", verdict},
          {"final_check", final_check}};
}

TrialMark TrialMark::from_json(const json& body) { return mark_from(body_of(body, "trial mark")); }

json JobInfo::to_json() const {
  json j = json::object();
  summary_to_json(job, j);
  json list = json::array();
  for (const CandidateInfo& c : candidates) list.push_back(c.to_json());
  j["candidates"] = list;
  j["device_names"] = device_names;
  j["stray_reports"] = stray_reports;
  j["profile_reports"] = profile_reports;
  j["rejected_by_device"] = rejected_by_device;
  j["warm_start"] = warm_start;
  json points = json::array();
  for (const TimelinePoint& p : timeline) points.push_back(p.to_json());
  j["timeline"] = points;
  json marks = json::array();
  for (const TrialMark& m : trials) marks.push_back(m.to_json());
  j["trials"] = marks;
  return j;
}

JobInfo JobInfo::from_json(const json& body) {
  const JsonReader r = body_of(body, "job_info");
  JobInfo info;
  info.job = summary_from(r);
  info.candidates = list<CandidateInfo>(r, "candidates", candidate_from);
  info.device_names = strings(r, "device_names");
  info.stray_reports = count(r, "stray_reports");
  info.profile_reports = count(r, "profile_reports");
  if (r.has("rejected_by_device")) {
    const JsonReader m = r.field("rejected_by_device");
    if (!m.value().is_object())
      m.fail(std::string("expected a map, found ") + m.value().type_name());
    for (const auto& [device, n] : m.value().items())
      info.rejected_by_device[device] = m.field(device.c_str()).uint();
  }
  if (r.has("warm_start")) info.warm_start = r.value().at("warm_start");
  info.timeline = list<TimelinePoint>(r, "timeline", point_from);
  info.trials = list<TrialMark>(r, "trials", mark_from);
  return info;
}

json PluginList::to_json() const {
  json list = json::array();
  for (const Plugin& p : plugins) {
    json params = json::array();
    for (const Parameter& h : p.hyperparameters) {
      json j = {
          {"name", h.name}, {"type", h.type}, {"default", h.default_value}, {"summary", h.summary}};
      if (h.min) j["min"] = *h.min;
      if (h.max) j["max"] = *h.max;
      if (!h.choices.empty()) j["choices"] = h.choices;
      params.push_back(j);
    }
    list.push_back({{"name", p.name},
                    {"kind", p.kind},
                    {"version", p.version},
                    {"summary", p.summary},
                    {"file", p.file},
                    {"torch_version", p.torch_version},
                    {"hyperparameters", params}});
  }
  json skips = json::array();
  for (const Skipped& s : skipped) skips.push_back({{"file", s.file}, {"reason", s.reason}});
  return {{"plugins", list}, {"skipped", skips}};
}

PluginList PluginList::from_json(const json& body) {
  const JsonReader r = body_of(body, "plugin_list");
  PluginList out;
  out.plugins = list<Plugin>(r, "plugins", [](const JsonReader& p) {
    Plugin plugin{text(p, "name"),
                  text(p, "kind"),
                  text(p, "version"),
                  text(p, "summary"),
                  text(p, "file"),
                  text(p, "torch_version"),
                  {}};
    plugin.hyperparameters = list<Parameter>(p, "hyperparameters", [](const JsonReader& h) {
      return Parameter{text(h, "name"),      text(h, "type"),        text(h, "default"),
                       text(h, "summary"),   maybe_number(h, "min"), maybe_number(h, "max"),
                       strings(h, "choices")};
    });
    return plugin;
  });
  out.skipped = list<Skipped>(r, "skipped", [](const JsonReader& s) {
    return Skipped{text(s, "file"), text(s, "reason")};
  });
  return out;
}

}  // namespace placement::messages
