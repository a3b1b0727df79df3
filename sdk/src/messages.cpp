#include "placement/messages.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "message_codec.h"
#include "op_profile_json.h"
#include "placement/serialization.h"

namespace placement::messages {

using detail::JsonReader;
using nlohmann::json;
using namespace codec;

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

JobState codec::Value<JobState>::read(const JsonReader& r) {
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

namespace {

// A failed step's error reaches placementd's log and `placementctl jobs show`: its first
// StepReport::kMaxError bytes, before anything else is done with it (the rest is counted, not
// kept), with its control characters (a Python traceback's line breaks, an escape sequence, C1
// controls) and bytes that are no UTF-8 written out, so the text stays one line of a bounded
// length, does nothing to a terminal and encodes as JSON.
std::string escape_controls(const std::string& text) {
  std::string out;
  const size_t kept = std::min(text.size(), StepReport::kMaxError);
  out.reserve(kept + 64);
  for (size_t i = 0; i < kept;) {
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
  if (kept < text.size()) out += " [" + std::to_string(text.size() - kept) + " more bytes]";
  return out;
}

}  // namespace

namespace codec {

// ---- Field tables, one per message (message_codec.h derives the codecs) ----

template <>
struct Table<Hello> {
  static constexpr const char* kName = "hello";
  static constexpr auto kFields =
      std::make_tuple(field("min_version", &Hello::min_version).need(),
                      field("max_version", &Hello::max_version).need(),
                      field("client", &Hello::client).read_with(display_text));
};

template <>
struct Table<Welcome> {
  static constexpr const char* kName = "welcome";
  static constexpr auto kFields =
      std::make_tuple(field("version", &Welcome::version).need(), field("server", &Welcome::server),
                      field("max_frame_bytes", &Welcome::max_frame_bytes),
                      field("uid", &Welcome::uid), field("admin", &Welcome::admin));
};

template <>
struct Table<Error> {
  static constexpr const char* kName = "error";
  static constexpr auto kFields =
      std::make_tuple(field("code", &Error::code), field("message", &Error::message),
                      field("fatal", &Error::fatal));
};

template <>
struct Table<ReplicaInfo> {
  static constexpr const char* kName = "replica";
  static constexpr auto kFields =
      std::make_tuple(field("rank", &ReplicaInfo::rank).need(),
                      field("world_size", &ReplicaInfo::world_size).need(),
                      field("group", &ReplicaInfo::group).need().read_with(display_text));
};

template <>
struct Table<HeldBytes> {
  static constexpr const char* kName = "held_bytes";
  static constexpr auto kFields = std::make_tuple(
      field("parameters", &HeldBytes::parameters), field("buffers", &HeldBytes::buffers),
      field("gradients", &HeldBytes::gradients),
      field("optimizer_state", &HeldBytes::optimizer_state), field("copies", &HeldBytes::copies),
      field("activations", &HeldBytes::activations));
};

template <>
struct Table<Attach> {
  static constexpr const char* kName = "attach";
  static constexpr auto kFields = std::make_tuple(
      field("job", &Attach::job).need().read_with(+[](const JsonReader& r) {
        std::string name = r.display_text();
        if (name.empty() || name.size() > Attach::kMaxJobName)
          r.fail("must have 1 to " + std::to_string(Attach::kMaxJobName) + " characters");
        return name;
      }),
      field("devices", &Attach::devices).need(),
      field("sdk_version", &Attach::sdk_version).read_with(display_text),
      field("torch_version", &Attach::torch_version).read_with(display_text),
      field("expected_steps", &Attach::expected_steps).omit_when_empty(),
      field("profile_steps", &Attach::profile_steps)
          .since_version(protocol::kProfileReportVersion)
          .read_with(+[](const JsonReader& r) -> std::optional<int64_t> {
            const nlohmann::json& v = r.value();
            const bool fits = v.is_number_unsigned()
                                  ? v.get<uint64_t>() <= uint64_t{Attach::kMaxProfileSteps}
                                  : v.is_number_integer() && v.get<int64_t>() >= 0 &&
                                        v.get<int64_t>() <= Attach::kMaxProfileSteps;
            if (!fits)
              r.fail("must be an integer from 0 to " + std::to_string(Attach::kMaxProfileSteps));
            return v.get<int64_t>();
          }),
      field("replica", &Attach::replica).since_version(protocol::kReplicaVersion));
};

template <>
struct Table<Attached> {
  static constexpr const char* kName = "attached";
  static constexpr auto kFields = std::make_tuple(
      field("session", &Attached::session).need(), field("grouper", &Attached::grouper),
      field("placer", &Attached::placer), field("algorithm", &Attached::algorithm),
      field("steps_per_candidate", &Attached::steps_per_candidate),
      field("warmup_steps", &Attached::warmup_steps),
      field("max_candidates", &Attached::max_candidates), field("notices", &Attached::notices),
      field("host_pinned_bytes", &Attached::host_pinned_bytes));
};

template <>
struct Table<GraphAccepted> {
  static constexpr const char* kName = "graph_accepted";
  static constexpr auto kFields = std::make_tuple(
      field("fingerprint", &GraphAccepted::fingerprint).need(), field("ops", &GraphAccepted::ops),
      field("edges", &GraphAccepted::edges), field("groups", &GraphAccepted::groups),
      field("cached", &GraphAccepted::cached),
      field("policy_resumed", &GraphAccepted::policy_resumed));
};

// The placement is read against the job's graph and devices, outside the table.
template <>
struct Table<Directive> {
  static constexpr const char* kName = "placement_directive";
  static constexpr auto kFields = std::make_tuple(
      field("placement_id", &Directive::placement_id).need(),
      field("reason", &Directive::reason).need(), field("state", &Directive::state).need(),
      // Sent to every version: a version 1 job reads it as false.
      field("profile", &Directive::profile),
      field("after_step", &Directive::after_step).omit_when_empty());
};

template <>
struct Table<StepReport> {
  static constexpr const char* kName = "step_report";
  static constexpr auto kFields = std::make_tuple(
      field("placement_id", &StepReport::placement_id).need(),
      field("step", &StepReport::step).need(),
      // A time is placementd's reward: a 0 s or infinitely fast step would be a best nothing can
      // beat (from_json also refuses 0 for a step that ran); a failed one may say 0.
      field("step_time_s", &StepReport::step_time_s).need().read_with(+[](const JsonReader& r) {
        const double t = r.number();
        if (!std::isfinite(t) || t < 0) r.fail("must be a finite number >= 0");
        return t;
      }),
      field("ok", &StepReport::ok).need(),
      field("error", &StepReport::error).omit_when_empty().read_with(+[](const JsonReader& r) {
        return escape_controls(r.string());
      }),
      field("profiled", &StepReport::profiled).since_version(protocol::kProfileReportVersion));
};

template <>
struct Table<Detached> {
  static constexpr const char* kName = "detached";
  static constexpr auto kFields =
      std::make_tuple(field("best_step_time_s", &Detached::best_step_time_s),
                      field("persisted", &Detached::persisted));
};

template <>
struct Table<ListJobs> {
  static constexpr const char* kName = "list_jobs";
  static constexpr auto kFields =
      std::make_tuple(field("all", &ListJobs::all), field("finished", &ListJobs::finished));
};

template <>
struct Table<JobShow> {
  static constexpr const char* kName = "job_show";
  static constexpr auto kFields = std::make_tuple(field("id", &JobShow::id).need());
};

template <>
struct Table<Reloaded> {
  static constexpr const char* kName = "reloaded";
  static constexpr auto kFields =
      std::make_tuple(field("config", &Reloaded::config), field("plugins", &Reloaded::plugins));
};

}  // namespace codec

// ---- Codecs ----

namespace {

template <typename M>
std::vector<std::string> keys_of() {
  std::vector<std::string> out;
  std::apply([&](const auto&... f) { (out.emplace_back(f.name), ...); }, Table<M>::kFields);
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> keys_read(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return keys_of<Hello>();
    case MessageType::kAttach:
      return keys_of<Attach>();
    case MessageType::kGraphUpload:
      return std::vector<std::string>{"graph", "placement"};
    case MessageType::kStepReport:
      return keys_of<StepReport>();
    case MessageType::kProfileReport:
      return std::vector<std::string>{"placement_id", "steps", "ops", "peak_bytes", "held_bytes"};
    case MessageType::kListJobs:
      return keys_of<ListJobs>();
    case MessageType::kJobShow:
      return keys_of<JobShow>();
    case MessageType::kPlacementRequest:
    case MessageType::kDetach:
    case MessageType::kStatus:
    case MessageType::kListPlugins:
    case MessageType::kReload:
      return std::vector<std::string>{};
    default:
      return std::nullopt;
  }
}

json Hello::to_json() const { return encode(*this); }
Hello Hello::from_json(const json& body) { return decode<Hello>(body); }

json Welcome::to_json() const { return encode(*this); }
Welcome Welcome::from_json(const json& body) { return decode<Welcome>(body); }

json Error::to_json() const { return encode(*this); }
Error Error::from_json(const json& body) { return decode<Error>(body); }

json ReplicaInfo::to_json() const { return encode(*this); }

ReplicaInfo codec::Value<ReplicaInfo>::read(const JsonReader& r) {
  ReplicaInfo out = decode<ReplicaInfo>(r);
  constexpr int64_t kMaxWorld = 1 << 20;
  if (out.world_size < 1 || out.world_size > kMaxWorld)
    r.field("world_size").fail("must be an integer from 1 to " + std::to_string(kMaxWorld));
  if (out.rank < 0 || out.rank >= out.world_size)
    r.field("rank").fail("must be an integer from 0 to world_size - 1 (" +
                         std::to_string(out.world_size - 1) + ")");
  if (out.group.empty() || out.group.size() > ReplicaInfo::kMaxGroupName)
    r.field("group").fail("must have 1 to " + std::to_string(ReplicaInfo::kMaxGroupName) +
                          " characters");
  return out;
}

bool HeldBytes::operator==(const HeldBytes& o) const {
  return parameters == o.parameters && buffers == o.buffers && gradients == o.gradients &&
         optimizer_state == o.optimizer_state && copies == o.copies && activations == o.activations;
}

json HeldBytes::to_json() const { return encode(*this); }
HeldBytes HeldBytes::from_json(const json& body) { return decode<HeldBytes>(body); }
HeldBytes codec::Value<HeldBytes>::read(const JsonReader& r) { return decode<HeldBytes>(r); }

json Attach::to_json(uint16_t version) const { return encode(*this, version); }
Attach Attach::from_json(const json& body) { return decode<Attach>(body); }

json Attached::to_json() const { return encode(*this); }
Attached Attached::from_json(const json& body) { return decode<Attached>(body); }

json GraphUpload::to_json(const DeviceSet& devices, uint16_t version) const {
  json j = {{"graph", placement::to_json(graph)}};
  if (version < protocol::kOpWorkVersion)
    for (json& op : j["graph"]["ops"]) op.erase("work");
  if (start) j["placement"] = placement::to_json(*start, devices);
  // Those daemons refuse both keys; a job on a residence plan runs it all the same, and such a
  // daemon proposes placements without one.
  if (version < protocol::kResidenceVersion) {
    j["graph"].erase("parameters");
    if (start) j["placement"].erase("residence");
  }
  return j;
}

GraphUpload GraphUpload::from_json(const json& body, const DeviceSet& devices) {
  const JsonReader r = body_of(body, "graph_upload");
  GraphUpload u;
  u.graph = nested(r.field("graph"),
                   [](const json& j) { return graph_from_json(j, UnknownKeys::kIgnore); });
  if (r.has("placement"))
    u.start = nested(r.field("placement"), [&](const json& j) {
      return placement_from_json(j, u.graph, devices, UnknownKeys::kIgnore);
    });
  return u;
}

json GraphAccepted::to_json() const { return encode(*this); }
GraphAccepted GraphAccepted::from_json(const json& body) { return decode<GraphAccepted>(body); }

json Directive::to_json(const DeviceSet& devices) const {
  json body = encode(*this);
  body["placement"] = placement::to_json(placement, devices);
  return body;
}

Directive Directive::from_json(const json& body, const OpGraph& graph, const DeviceSet& devices) {
  const JsonReader r = body_of(body, Table<Directive>::kName);
  Directive d = decode<Directive>(r);
  d.placement = nested(r.field("placement"), [&](const json& j) {
    return placement_from_json(j, graph, devices, UnknownKeys::kIgnore);
  });
  return d;
}

json PlacementRequest::to_json() const { return json::object(); }

bool StepReport::operator==(const StepReport& o) const {
  return placement_id == o.placement_id && step == o.step && step_time_s == o.step_time_s &&
         ok == o.ok && error == o.error && profiled == o.profiled;
}

json StepReport::to_json(uint16_t version) const { return encode(*this, version); }

StepReport StepReport::from_json(const json& body) {
  const JsonReader r = body_of(body, Table<StepReport>::kName);
  StepReport m = decode<StepReport>(r);
  if (m.ok && m.step_time_s == 0)
    r.field("step_time_s").fail("must be > 0 for a step that ran (ok)");
  return m;
}

json Detached::to_json() const { return encode(*this); }
Detached Detached::from_json(const json& body) { return decode<Detached>(body); }

json Detach::to_json() const { return json::object(); }

json ListJobs::to_json() const { return encode(*this); }
ListJobs ListJobs::from_json(const json& body) { return decode<ListJobs>(body); }

json JobShow::to_json() const { return encode(*this); }
JobShow JobShow::from_json(const json& body) { return decode<JobShow>(body); }

json Reloaded::to_json() const { return encode(*this); }
Reloaded Reloaded::from_json(const json& body) { return decode<Reloaded>(body); }

json Reload::to_json() const { return json::object(); }

bool ProfileReport::Entry::operator==(const Entry& o) const {
  return op == o.op && kind == o.kind && profile == o.profile;
}

bool ProfileReport::operator==(const ProfileReport& o) const {
  return placement_id == o.placement_id && steps == o.steps && ops == o.ops &&
         peak_bytes == o.peak_bytes && held_bytes == o.held_bytes;
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
  json out = {{"placement_id", placement_id}, {"steps", steps}, {"ops", list}};
  if (!peak_bytes.empty()) out["peak_bytes"] = peak_bytes;
  if (!held_bytes.empty())
    out["held_bytes"] = codec::Value<std::vector<HeldBytes>>::write(held_bytes);
  return out;
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
  if (r.has("peak_bytes")) {
    const JsonReader peaks = r.field("peak_bytes");
    for (size_t i = 0; i < peaks.array_size(); ++i)
      report.peak_bytes.push_back(peaks.element(i).uint());
  }
  if (r.has("held_bytes"))
    report.held_bytes = codec::Value<std::vector<HeldBytes>>::read(r.field("held_bytes"));
  return report;
}

}  // namespace placement::messages
