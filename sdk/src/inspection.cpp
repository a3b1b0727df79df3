#include "placement/inspection.h"

#include "json_reader.h"
#include "message_codec.h"

namespace placement::messages {

using detail::JsonReader;
using nlohmann::json;
using namespace codec;

namespace codec {

// ---- Field tables (message_codec.h derives the codecs). Every key is optional on the way in: an
// older daemon may lack one, and the reply still reads. ----

template <>
struct Table<StatusReply::PluginCounts> {
  static constexpr const char* kName = "plugins";
  static constexpr auto kFields =
      std::make_tuple(field("grouper", &StatusReply::PluginCounts::grouper),
                      field("placer", &StatusReply::PluginCounts::placer),
                      field("algorithm", &StatusReply::PluginCounts::algorithm));
};
template <>
struct Value<StatusReply::PluginCounts> : TableValue<StatusReply::PluginCounts> {};

template <>
struct Table<StatusReply::Triple> {
  static constexpr const char* kName = "policy";
  static constexpr auto kFields =
      std::make_tuple(field("grouper", &StatusReply::Triple::grouper),
                      field("placer", &StatusReply::Triple::placer),
                      field("algorithm", &StatusReply::Triple::algorithm));
};
template <>
struct Value<StatusReply::Triple> : TableValue<StatusReply::Triple> {};

template <>
struct Table<StatusReply::Peer> {
  static constexpr const char* kName = "peer";
  static constexpr auto kFields = std::make_tuple(field("uid", &StatusReply::Peer::uid),
                                                  field("admin", &StatusReply::Peer::admin));
};
template <>
struct Value<StatusReply::Peer> : TableValue<StatusReply::Peer> {};

template <>
struct Table<StatusReply> {
  static constexpr const char* kName = "status_reply";
  static constexpr auto kFields = std::make_tuple(
      field("version", &StatusReply::version), field("pid", &StatusReply::pid),
      field("uptime_s", &StatusReply::uptime_s), field("config", &StatusReply::config),
      field("socket", &StatusReply::socket), field("state_dir", &StatusReply::state_dir),
      field("store_failed_writes", &StatusReply::store_failed_writes),
      field("jobs_visible", &StatusReply::jobs_visible),
      field("jobs_total", &StatusReply::jobs_total),
      field("connections", &StatusReply::connections),
      field("connections_total", &StatusReply::connections_total),
      field("frames_received", &StatusReply::frames_received),
      field("reports_received", &StatusReply::reports_received),
      field("protocol_errors", &StatusReply::protocol_errors),
      field("plugins", &StatusReply::plugins),
      field("plugins_skipped", &StatusReply::plugins_skipped),
      field("policy", &StatusReply::policy), field("peer", &StatusReply::peer));
};

template <>
struct Table<JobSummary> {
  static constexpr const char* kName = "job";
  static constexpr auto kFields = std::make_tuple(
      field("id", &JobSummary::id).need(), field("name", &JobSummary::name),
      field("uid", &JobSummary::uid), field("pid", &JobSummary::pid),
      field("state", &JobSummary::state).need(), field("fingerprint", &JobSummary::fingerprint),
      field("ops", &JobSummary::ops), field("groups", &JobSummary::groups),
      field("devices", &JobSummary::devices), field("grouper", &JobSummary::grouper),
      field("placer", &JobSummary::placer), field("algorithm", &JobSummary::algorithm),
      field("steps", &JobSummary::steps), field("failed_steps", &JobSummary::failed_steps),
      field("candidates_tried", &JobSummary::candidates_tried),
      field("max_candidates", &JobSummary::max_candidates),
      field("start_step_time_s", &JobSummary::start_step_time_s),
      field("current_step_time_s", &JobSummary::current_step_time_s),
      field("best_step_time_s", &JobSummary::best_step_time_s),
      field("start_step_time_interval_s", &JobSummary::start_step_time_interval_s),
      field("best_step_time_interval_s", &JobSummary::best_step_time_interval_s),
      field("exploration_overhead", &JobSummary::exploration_overhead),
      field("job_s", &JobSummary::job_s), field("realized_speedup", &JobSummary::realized_speedup),
      field("realized_speedup_interval", &JobSummary::realized_speedup_interval),
      field("start_mean_step_time_s", &JobSummary::start_mean_step_time_s),
      field("beyond_best_s", &JobSummary::beyond_best_s),
      field("current_placement", &JobSummary::current_placement),
      field("best_placement", &JobSummary::best_placement), field("on_best", &JobSummary::on_best),
      field("exploration_finished", &JobSummary::exploration_finished),
      field("exploration_steps", &JobSummary::exploration_steps),
      field("expected_steps", &JobSummary::expected_steps),
      field("budget_used", &JobSummary::budget_used), field("paused", &JobSummary::paused),
      field("speedup", &JobSummary::speedup),
      field("steps_to_within_2pct", &JobSummary::steps_to_within_2pct),
      field("seconds_to_within_2pct", &JobSummary::seconds_to_within_2pct),
      field("rejected", &JobSummary::rejected),
      field("repeats_scored", &JobSummary::repeats_scored),
      field("reexplorations", &JobSummary::reexplorations),
      field("profiled_kinds", &JobSummary::profiled_kinds),
      field("profiled_steps", &JobSummary::profiled_steps),
      field("profiling_overhead_s", &JobSummary::profiling_overhead_s),
      field("policy_error", &JobSummary::policy_error),
      field("attached_s", &JobSummary::attached_s), field("replica", &JobSummary::replica));
};
template <>
struct Value<JobSummary> : TableValue<JobSummary> {};

template <>
struct Table<JobList> {
  static constexpr const char* kName = "job_list";
  static constexpr auto kFields = std::make_tuple(field("jobs", &JobList::jobs));
};

template <>
struct Table<CandidateInfo> {
  static constexpr const char* kName = "candidate";
  static constexpr auto kFields = std::make_tuple(
      field("id", &CandidateInfo::id).need(), field("reason", &CandidateInfo::reason).need(),
      field("stale", &CandidateInfo::stale),
      field("placement_fingerprint", &CandidateInfo::placement_fingerprint),
      field("ops_per_device", &CandidateInfo::ops_per_device),
      field("steps", &CandidateInfo::steps), field("failures", &CandidateInfo::failures),
      field("error", &CandidateInfo::error),
      field("median_step_time_s", &CandidateInfo::median_step_time_s),
      field("peak_bytes", &CandidateInfo::peak_bytes),
      field("held_bytes", &CandidateInfo::held_bytes), field("trial", &CandidateInfo::trial));
};
template <>
struct Value<CandidateInfo> : TableValue<CandidateInfo> {};

template <>
struct Table<TimelinePoint> {
  static constexpr const char* kName = "timeline point";
  static constexpr auto kFields = std::make_tuple(
      field("first_step", &TimelinePoint::first_step), field("steps", &TimelinePoint::steps),
      field("placement", &TimelinePoint::placement), field("best", &TimelinePoint::best),
      field("mean_step_time_s", &TimelinePoint::mean_step_time_s));
};
template <>
struct Value<TimelinePoint> : TableValue<TimelinePoint> {};

template <>
struct Table<TrialMark> {
  static constexpr const char* kName = "trial mark";
  static constexpr auto kFields = std::make_tuple(
      field("candidate", &TrialMark::candidate), field("against", &TrialMark::against),
      field("step", &TrialMark::step), field("verdict", &TrialMark::verdict),
      field("final_check", &TrialMark::final_check));
};
template <>
struct Value<TrialMark> : TableValue<TrialMark> {};

// The job's summary fields sit beside these in the same map (JobInfo's codec adds them).
template <>
struct Table<JobInfo> {
  static constexpr const char* kName = "job_info";
  static constexpr auto kFields = std::make_tuple(
      field("candidates", &JobInfo::candidates), field("device_names", &JobInfo::device_names),
      field("stray_reports", &JobInfo::stray_reports),
      field("profile_reports", &JobInfo::profile_reports),
      field("profile_reports_dropped", &JobInfo::profile_reports_dropped).omit_when_empty(),
      field("rejected_by_device", &JobInfo::rejected_by_device),
      field("warm_start", &JobInfo::warm_start), field("refits", &JobInfo::refits),
      field("timeline", &JobInfo::timeline), field("trials", &JobInfo::trials));
};

template <>
struct Table<PluginList::Parameter> {
  static constexpr const char* kName = "hyperparameter";
  static constexpr auto kFields = std::make_tuple(
      field("name", &PluginList::Parameter::name), field("type", &PluginList::Parameter::type),
      field("default", &PluginList::Parameter::default_value),
      field("summary", &PluginList::Parameter::summary),
      field("min", &PluginList::Parameter::min).omit_when_empty(),
      field("max", &PluginList::Parameter::max).omit_when_empty(),
      field("choices", &PluginList::Parameter::choices).omit_when_empty());
};
template <>
struct Value<PluginList::Parameter> : TableValue<PluginList::Parameter> {};

template <>
struct Table<PluginList::Plugin> {
  static constexpr const char* kName = "plugin";
  static constexpr auto kFields = std::make_tuple(
      field("name", &PluginList::Plugin::name), field("kind", &PluginList::Plugin::kind),
      field("version", &PluginList::Plugin::version),
      field("summary", &PluginList::Plugin::summary), field("file", &PluginList::Plugin::file),
      field("torch_version", &PluginList::Plugin::torch_version),
      field("hyperparameters", &PluginList::Plugin::hyperparameters));
};
template <>
struct Value<PluginList::Plugin> : TableValue<PluginList::Plugin> {};

template <>
struct Table<PluginList::Skipped> {
  static constexpr const char* kName = "skipped";
  static constexpr auto kFields = std::make_tuple(field("file", &PluginList::Skipped::file),
                                                  field("reason", &PluginList::Skipped::reason));
};
template <>
struct Value<PluginList::Skipped> : TableValue<PluginList::Skipped> {};

template <>
struct Table<PluginList> {
  static constexpr const char* kName = "plugin_list";
  static constexpr auto kFields = std::make_tuple(field("plugins", &PluginList::plugins),
                                                  field("skipped", &PluginList::skipped));
};

}  // namespace codec

// ---- Codecs ----

json StatusReply::to_json() const { return encode(*this); }
StatusReply StatusReply::from_json(const json& body) { return decode<StatusReply>(body); }

json JobSummary::to_json() const { return encode(*this); }
JobSummary JobSummary::from_json(const json& body) { return decode<JobSummary>(body); }

json JobList::to_json() const { return encode(*this); }
JobList JobList::from_json(const json& body) { return decode<JobList>(body); }

json CandidateInfo::to_json() const { return encode(*this); }
CandidateInfo CandidateInfo::from_json(const json& body) { return decode<CandidateInfo>(body); }

json TimelinePoint::to_json() const { return encode(*this); }
TimelinePoint TimelinePoint::from_json(const json& body) { return decode<TimelinePoint>(body); }

json TrialMark::to_json() const { return encode(*this); }
TrialMark TrialMark::from_json(const json& body) { return decode<TrialMark>(body); }

json JobInfo::to_json() const {
  json j = encode(job);
  encode_into(*this, j);
  return j;
}

JobInfo JobInfo::from_json(const json& body) {
  const JsonReader r = body_of(body, Table<JobInfo>::kName);
  JobInfo info;
  decode_into(r, info.job);
  decode_into(r, info);
  return info;
}

json PluginList::to_json() const { return encode(*this); }
PluginList PluginList::from_json(const json& body) { return decode<PluginList>(body); }

}  // namespace placement::messages
