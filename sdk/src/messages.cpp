#include "placement/messages.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "message_fields.h"
#include "op_profile_json.h"
#include "placement/serialization.h"

namespace placement::messages {

using detail::JsonReader;
using nlohmann::json;
using namespace fields;

namespace {

constexpr std::pair<JobState, const char*> kStates[] = {
    {JobState::kAttached, "attached"},        {JobState::kProfiling, "profiling"},
    {JobState::kExploring, "exploring"},      {JobState::kExploiting, "exploiting"},
    {JobState::kReexploring, "re-exploring"}, {JobState::kDetached, "detached"},
    {JobState::kFollowing, "following"}};

constexpr std::pair<Reason, const char*> kReasons[] = {{Reason::kStart, "start"},
                                                       {Reason::kCached, "cached"},
                                                       {Reason::kSingleDevice, "single device"},
                                                       {Reason::kWarmStart, "warm start"},
                                                       {Reason::kPolicy, "policy"},
                                                       {Reason::kReexplore, "re-explore"},
                                                       {Reason::kRemeasure, "re-measure"},
                                                       {Reason::kBest, "best"}};

}  // namespace

const char* to_string(JobState state) {
  for (const auto& [s, name] : kStates)
    if (s == state) return name;
  return "unknown";
}

std::vector<JobState> all_job_states() {
  std::vector<JobState> out;
  for (const auto& [s, name] : kStates) out.push_back(s);
  return out;
}

const char* to_string(Reason reason) {
  for (const auto& [r, name] : kReasons)
    if (r == reason) return name;
  return "unknown";
}

JobState fields::state_from_string(const JsonReader& r) {
  const std::string name = r.string();
  for (const auto& [s, n] : kStates)
    if (name == n) return s;
  r.fail("'" + name + "' is not a job state");
}

Reason reason_from_string(const std::string& name) {
  for (const auto& [r, n] : kReasons)
    if (name == n) return r;
  std::string known;
  for (const auto& [r, n] : kReasons) known += (known.empty() ? "'" : ", '") + std::string(n) + "'";
  throw FormatError("'" + name + "' is none of the reasons " + known);
}

json Hello::to_json() const {
  return {{"min_version", min_version}, {"max_version", max_version}, {"client", client}};
}

Hello Hello::from_json(const json& body) {
  const JsonReader r = body_of(body, "hello");
  Hello h;
  h.min_version = unsigned_field<uint16_t>(r, "min_version");
  h.max_version = unsigned_field<uint16_t>(r, "max_version");
  if (r.has("client")) h.client = r.field("client").display_text();
  return h;
}

json Welcome::to_json() const {
  return {{"version", version},
          {"server", server},
          {"max_frame_bytes", max_frame_bytes},
          {"uid", uid},
          {"admin", admin}};
}

Welcome Welcome::from_json(const json& body) {
  const JsonReader r = body_of(body, "welcome");
  Welcome w;
  w.version = unsigned_field<uint16_t>(r, "version");
  w.server = text(r, "server");
  if (r.has("max_frame_bytes")) w.max_frame_bytes = unsigned_field<uint32_t>(r, "max_frame_bytes");
  if (r.has("uid")) w.uid = r.field("uid").uint();
  w.admin = flag(r, "admin");
  return w;
}

json Error::to_json() const { return {{"code", code}, {"message", message}, {"fatal", fatal}}; }

Error Error::from_json(const json& body) {
  const JsonReader r = body_of(body, "error");
  return {text(r, "code", "unknown"), text(r, "message"), flag(r, "fatal")};
}

json ReplicaInfo::to_json() const {
  return {{"rank", rank}, {"world_size", world_size}, {"group", group}};
}

ReplicaInfo fields::replica_from(const JsonReader& r) {
  if (!r.value().is_object()) r.fail(std::string("expected a map, found ") + r.value().type_name());
  // An integer within [low, high], or an error naming the field and the range.
  const auto integer_in = [](const JsonReader& f, int64_t low, int64_t high,
                             const std::string& range) {
    const nlohmann::json& v = f.value();
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(high)
                                             : v.is_number_integer() && v.get<int64_t>() >= low &&
                                                   v.get<int64_t>() <= high;
    if (!fits) f.fail("must be an integer from " + range);
    return v.get<int64_t>();
  };
  ReplicaInfo out;
  constexpr int64_t kMaxWorld = 1 << 20;
  out.world_size =
      integer_in(r.field("world_size"), 1, kMaxWorld, "1 to " + std::to_string(kMaxWorld));
  out.rank = integer_in(r.field("rank"), 0, out.world_size - 1,
                        "0 to world_size - 1 (" + std::to_string(out.world_size - 1) + ")");
  out.group = r.field("group").display_text();
  if (out.group.empty() || out.group.size() > ReplicaInfo::kMaxGroupName)
    r.field("group").fail("must have 1 to " + std::to_string(ReplicaInfo::kMaxGroupName) +
                          " characters");
  return out;
}

json Attach::to_json() const {
  json j = {{"job", job},
            {"devices", placement::to_json(devices)},
            {"sdk_version", sdk_version},
            {"torch_version", torch_version}};
  if (expected_steps > 0) j["expected_steps"] = expected_steps;
  if (profile_steps) j["profile_steps"] = *profile_steps;
  if (replica) j["replica"] = replica->to_json();
  return j;
}

Attach Attach::from_json(const json& body) {
  const JsonReader r = body_of(body, "attach");
  Attach a;
  a.job = r.field("job").display_text();
  if (a.job.empty() || a.job.size() > kMaxJobName)
    r.field("job").fail("must have 1 to " + std::to_string(kMaxJobName) + " characters");
  a.devices = nested(r.field("devices"), [](const json& j) { return devices_from_json(j); });
  if (r.has("sdk_version")) a.sdk_version = r.field("sdk_version").display_text();
  if (r.has("torch_version")) a.torch_version = r.field("torch_version").display_text();
  if (r.has("expected_steps")) a.expected_steps = r.field("expected_steps").uint();
  if (r.has("profile_steps")) {
    const JsonReader f = r.field("profile_steps");
    if (!f.value().is_number_unsigned() ||
        f.value().get<uint64_t>() > static_cast<uint64_t>(kMaxProfileSteps))
      f.fail("must be an integer from 0 to " + std::to_string(kMaxProfileSteps));
    a.profile_steps = f.value().get<int64_t>();
  }
  if (r.has("replica")) a.replica = replica_from(r.field("replica"));
  return a;
}

json Attached::to_json() const {
  return {{"session", session},
          {"grouper", grouper},
          {"placer", placer},
          {"algorithm", algorithm},
          {"steps_per_candidate", steps_per_candidate},
          {"warmup_steps", warmup_steps},
          {"max_candidates", max_candidates},
          {"notices", notices}};
}

Attached Attached::from_json(const json& body) {
  const JsonReader r = body_of(body, "attached");
  Attached a;
  a.session = r.field("session").uint();
  a.grouper = text(r, "grouper");
  a.placer = text(r, "placer");
  a.algorithm = text(r, "algorithm");
  if (r.has("steps_per_candidate"))
    a.steps_per_candidate = r.field("steps_per_candidate").integer();
  if (r.has("warmup_steps")) a.warmup_steps = r.field("warmup_steps").integer();
  if (r.has("max_candidates")) a.max_candidates = r.field("max_candidates").integer();
  if (r.has("notices")) {
    const JsonReader n = r.field("notices");
    for (size_t i = 0; i < n.array_size(); ++i) a.notices.push_back(n.element(i).string());
  }
  return a;
}

json GraphUpload::to_json(const DeviceSet& devices, uint16_t version) const {
  json j = {{"graph", placement::to_json(graph)}};
  if (version < protocol::kOpWorkVersion)
    for (json& op : j["graph"]["ops"]) op.erase("work");
  if (start) j["placement"] = placement::to_json(*start, devices);
  return j;
}

GraphUpload GraphUpload::from_json(const json& body, const DeviceSet& devices) {
  const JsonReader r = body_of(body, "graph_upload");
  GraphUpload u;
  u.graph = nested(r.field("graph"), [](const json& j) { return graph_from_json(j); });
  if (r.has("placement"))
    u.start = nested(r.field("placement"),
                     [&](const json& j) { return placement_from_json(j, u.graph, devices); });
  return u;
}

json GraphAccepted::to_json() const {
  return {{"fingerprint", fingerprint}, {"ops", ops},       {"edges", edges},
          {"groups", groups},           {"cached", cached}, {"policy_resumed", policy_resumed}};
}

GraphAccepted GraphAccepted::from_json(const json& body) {
  const JsonReader r = body_of(body, "graph_accepted");
  GraphAccepted a;
  a.fingerprint = r.field("fingerprint").string();
  if (r.has("ops")) a.ops = r.field("ops").uint();
  if (r.has("edges")) a.edges = r.field("edges").uint();
  if (r.has("groups")) a.groups = r.field("groups").integer();
  a.cached = flag(r, "cached");
  a.policy_resumed = flag(r, "policy_resumed");
  return a;
}

json Directive::to_json(const DeviceSet& devices) const {
  json body = {{"placement_id", placement_id},
               {"reason", messages::to_string(reason)},
               {"state", messages::to_string(state)},
               {"profile", profile},
               {"placement", placement::to_json(placement, devices)}};
  if (after_step) body["after_step"] = *after_step;
  return body;
}

Directive Directive::from_json(const json& body, const OpGraph& graph, const DeviceSet& devices) {
  const JsonReader r = body_of(body, "placement_directive");
  Directive d;
  d.placement_id = r.field("placement_id").uint();
  const JsonReader reason = r.field("reason");
  const std::string name = reason.string();
  d.reason = nested(reason, [&](const json&) { return reason_from_string(name); });
  d.state = state_from_string(r.field("state"));
  d.profile = flag(r, "profile");
  if (r.has("after_step")) d.after_step = r.field("after_step").uint();
  d.placement = nested(r.field("placement"),
                       [&](const json& j) { return placement_from_json(j, graph, devices); });
  return d;
}

json PlacementRequest::to_json() const { return json::object(); }

namespace {

// A failed step's error reaches placementd's log and `placementctl jobs show`: its control
// characters (a Python traceback's line breaks, an escape sequence, C1 controls) and bytes that
// are no UTF-8 are written out, so the text stays one line, does nothing to a terminal and
// encodes as JSON.
std::string escape_controls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = detail::utf8_sequence(text, i).length;
    char escaped[8];
    if (byte == '\n') {
      out += "\\n";
    } else if (length == 0 || byte < 0x20 || byte == 0x7F) {
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
      out += escaped;
    } else if (length == 2 && byte == 0xC2 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {  // U+0080..U+009F
      std::snprintf(escaped, sizeof(escaped), "\\u%04X", static_cast<unsigned char>(text[i + 1]));
      out += escaped;
    } else {
      out.append(text, i, length);
    }
    i += length == 0 ? 1 : length;
  }
  return out;
}

}  // namespace

bool StepReport::operator==(const StepReport& o) const {
  return placement_id == o.placement_id && step == o.step && step_time_s == o.step_time_s &&
         ok == o.ok && error == o.error && profiled == o.profiled;
}

json StepReport::to_json() const {
  json j = {
      {"placement_id", placement_id}, {"step", step}, {"step_time_s", step_time_s}, {"ok", ok}};
  if (!error.empty()) j["error"] = error;
  if (profiled) j["profiled"] = true;
  return j;
}

StepReport StepReport::from_json(const json& body) {
  const JsonReader r = body_of(body, "step_report");
  StepReport m;
  m.placement_id = r.field("placement_id").uint();
  m.step = r.field("step").uint();
  m.step_time_s = r.field("step_time_s").number();
  m.ok = r.field("ok").boolean();
  // A time is placementd's reward: a step that ran took some time (a 0 s or infinitely fast step
  // would be a best nothing can beat); a failed one may say 0.
  if (!std::isfinite(m.step_time_s) || m.step_time_s < 0)
    r.field("step_time_s").fail("must be a finite number >= 0");
  if (m.ok && m.step_time_s == 0)
    r.field("step_time_s").fail("must be > 0 for a step that ran (ok)");
  if (r.has("error")) m.error = escape_controls(r.field("error").string());
  if (r.has("profiled")) m.profiled = r.field("profiled").boolean();
  return m;
}

json Detached::to_json() const {
  return {{"best_step_time_s", best_step_time_s ? json(*best_step_time_s) : json(nullptr)},
          {"persisted", persisted}};
}

Detached Detached::from_json(const json& body) {
  const JsonReader r = body_of(body, "detached");
  Detached d;
  if (r.has("best_step_time_s") && !r.field("best_step_time_s").value().is_null())
    d.best_step_time_s = r.field("best_step_time_s").number();
  d.persisted = flag(r, "persisted");
  return d;
}

json Detach::to_json() const { return json::object(); }

json ListJobs::to_json() const { return {{"all", all}, {"finished", finished}}; }

ListJobs ListJobs::from_json(const json& body) {
  const JsonReader r = body_of(body, "list_jobs");
  return {flag(r, "all"), flag(r, "finished")};
}

json JobShow::to_json() const { return {{"id", id}}; }

JobShow JobShow::from_json(const json& body) {
  const JsonReader r = body_of(body, "job_show");
  return {r.field("id").uint()};
}

json Reloaded::to_json() const { return {{"config", config}, {"plugins", plugins}}; }

Reloaded Reloaded::from_json(const json& body) {
  const JsonReader r = body_of(body, "reloaded");
  return {text(r, "config"), r.has("plugins") ? r.field("plugins").uint() : 0};
}

json Reload::to_json() const { return json::object(); }

bool ProfileReport::Entry::operator==(const Entry& o) const {
  return op == o.op && kind == o.kind && profile == o.profile;
}

bool ProfileReport::operator==(const ProfileReport& o) const {
  return placement_id == o.placement_id && steps == o.steps && ops == o.ops;
}

void ProfileReport::apply(OpGraph& graph) const {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].op < 0 || static_cast<size_t>(ops[i].op) >= graph.ops.size())
      throw std::invalid_argument("profile entry " + std::to_string(i) + ": op " +
                                  std::to_string(ops[i].op) + " is not in the graph (" +
                                  std::to_string(graph.ops.size()) + " ops)");
  for (const Entry& e : ops) graph.ops[e.op].profile[e.kind] = e.profile;
}

json ProfileReport::to_json() const {
  json list = json::array();
  for (const Entry& e : ops) {
    json j = detail::op_profile_to_json(e.profile);
    j["op"] = e.op;
    j["kind"] = e.kind;
    list.push_back(std::move(j));
  }
  return {{"placement_id", placement_id}, {"steps", steps}, {"ops", list}};
}

ProfileReport ProfileReport::from_json(const json& body) {
  const JsonReader r = body_of(body, "profile_report");
  ProfileReport report;
  report.placement_id = r.field("placement_id").uint();
  report.steps = r.field("steps").uint();
  const JsonReader list = r.field("ops");
  for (size_t i = 0; i < list.array_size(); ++i) {
    const JsonReader e = list.element(i);
    Entry entry;
    entry.op = e.field("op").small_int();
    if (entry.op < 0) e.field("op").fail("must be >= 0");
    entry.kind = e.field("kind").string();
    try {
      (void)device_kind_from_string(entry.kind);
    } catch (const std::invalid_argument& error) {
      e.field("kind").fail(error.what());
    }
    entry.profile = detail::op_profile_from_json(e);
    report.ops.push_back(std::move(entry));
  }
  return report;
}

}  // namespace placement::messages
