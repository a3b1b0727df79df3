// The protocol's message types: what one side encodes the other decodes to the same value, and a
// wrong body names the field at fault.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "placement/messages.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placement::messages {
namespace {

using nlohmann::json;

// Through the wire's encoding too: CBOR keeps what JSON keeps.
json over_the_wire(const json& body) {
  const auto frame = protocol::encode_frame(MessageType::kAttach, 1, body);
  return protocol::decode_payload(frame.data() + protocol::kHeaderSize,
                                  frame.size() - protocol::kHeaderSize);
}

std::string error_of(const std::function<void()>& decode) {
  try {
    decode();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Messages, ReasonsAndStatesHaveOneNameEach) {
  for (Reason r : {Reason::kStart, Reason::kCached, Reason::kSingleDevice, Reason::kWarmStart,
                   Reason::kPolicy, Reason::kReexplore, Reason::kRemeasure, Reason::kBest})
    EXPECT_EQ(reason_from_string(to_string(r)), r) << to_string(r);
  EXPECT_STREQ(to_string(Reason::kSingleDevice), "single device");
  EXPECT_STREQ(to_string(JobState::kReexploring), "re-exploring");
  EXPECT_STREQ(to_string(JobState::kFollowing), "following");
  EXPECT_EQ(all_job_states().back(), JobState::kFollowing);
  EXPECT_EQ(error_of([] {
              reason_from_string("hunch");
            }).rfind("'hunch' is none of the reasons 'start', 'cached'", 0),
            0u);
}

TEST(Messages, AttachRoundTripsAndChecksItsLimits) {
  Attach a;
  a.job = "bert";
  a.devices = testing::devices(2);
  a.sdk_version = "0.1.0";
  a.torch_version = "2.11.0";
  a.expected_steps = 5000;
  a.profile_steps = 3;
  const Attach b = Attach::from_json(over_the_wire(a.to_json()));
  EXPECT_EQ(b.job, "bert");
  EXPECT_EQ(b.devices.fingerprint(), a.devices.fingerprint());
  EXPECT_EQ(b.torch_version, "2.11.0");
  EXPECT_EQ(b.expected_steps, 5000u);
  EXPECT_EQ(b.profile_steps, 3);

  // Protocol 1 jobs send neither expected_steps (when unknown) nor profile_steps.
  a.expected_steps = 0;
  a.profile_steps.reset();
  const json v1 = a.to_json();
  EXPECT_FALSE(v1.contains("expected_steps"));
  EXPECT_FALSE(v1.contains("profile_steps"));
  EXPECT_FALSE(Attach::from_json(v1).profile_steps.has_value());

  json body = a.to_json();
  body["job"] = std::string(Attach::kMaxJobName + 1, 'x');
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.job: must have 1 to 256 characters");
  body = a.to_json();
  body["profile_steps"] = -1;
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.profile_steps: must be an integer from 0 to 1000");
  body = a.to_json();
  body["devices"]["devices"][0]["name"] = "tpu:0";
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }).rfind("attach.devices: devices[0].name", 0),
            0u)
      << error_of([&] { Attach::from_json(body); });
  body = a.to_json();
  body["expected_steps"] = "many";
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.expected_steps: expected a non-negative integer, found string");
  EXPECT_EQ(error_of([] { Attach::from_json(json::array()); }),
            "attach: expected a map, found array");
  // A newer peer's optional field is not an error.
  body = a.to_json();
  body["priority"] = 7;
  EXPECT_EQ(Attach::from_json(body).job, "bert");
}

TEST(Messages, NamesShownToPeopleHoldNoControlCharactersAndAreUtf8) {
  // A job name reaches `placementctl jobs` on an admin's terminal and placementd's log: an escape
  // sequence there would run in the terminal, a line break forge a log line.
  Attach a;
  a.job = "训练-bert";
  a.devices = testing::devices(2);
  EXPECT_EQ(Attach::from_json(a.to_json()).job, "训练-bert");
  json body = a.to_json();
  body["job"] = "job\x1b]0;pwned\x07";
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.job: holds the control character U+001B (byte 3): names are shown on terminals "
            "and in logs");
  body["job"] = "a\nb";
  EXPECT_EQ(error_of([&] {
              Attach::from_json(body);
            }).rfind("attach.job: holds the control character U+000A", 0),
            0u);
  body["job"] =
      "c1\xc2\x9b"
      "31m";
  EXPECT_EQ(error_of([&] {
              Attach::from_json(body);
            }).rfind("attach.job: holds the control character U+009B", 0),
            0u);
  body = a.to_json();
  body["torch_version"] = "2.11\r";
  EXPECT_EQ(error_of([&] {
              Attach::from_json(body);
            }).rfind("attach.torch_version: holds the control character", 0),
            0u);
  // Over CBOR a string is bytes: invalid UTF-8 (a lone continuation byte, an overlong form).
  for (const char* bad : {"x\x80", "\xc0\xaf", "\xed\xa0\x80"}) {
    body["job"] = bad;
    json decoded;
    ASSERT_NO_THROW(decoded = json::from_cbor(json::to_cbor(body), true, false));
    EXPECT_EQ(error_of([&] { Attach::from_json(decoded); }).rfind("attach.job: not valid UTF-8", 0),
              0u)
        << bad;
  }
}

TEST(Messages, AttachCarriesTheReplicaAndChecksItsRankAndGroup) {
  Attach a;
  a.job = "lm";
  a.devices = testing::devices(1);
  EXPECT_FALSE(a.to_json().contains("replica")) << "a job of one process sends none";
  a.replica = ReplicaInfo{1, 4, "10.0.0.1:29500/3fa2c1d0"};
  const Attach b = Attach::from_json(over_the_wire(a.to_json()));
  ASSERT_TRUE(b.replica.has_value());
  EXPECT_EQ(b.replica->rank, 1);
  EXPECT_EQ(b.replica->world_size, 4);
  EXPECT_EQ(b.replica->group, "10.0.0.1:29500/3fa2c1d0");
  EXPECT_TRUE(b.replica->follower());
  EXPECT_FALSE((ReplicaInfo{0, 4, "g"}.follower()));

  json body = a.to_json();
  body["replica"]["rank"] = 4;
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica.rank: must be an integer from 0 to world_size - 1 (3)");
  body["replica"]["rank"] = -1;
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica.rank: must be an integer from 0 to world_size - 1 (3)");
  body = a.to_json();
  body["replica"]["world_size"] = 0;
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica.world_size: must be an integer from 1 to 1048576");
  body = a.to_json();
  body["replica"]["group"] = "";
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica.group: must have 1 to 256 characters");
  body = a.to_json();
  body["replica"].erase("group");
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica: missing required key 'group'");
  body["replica"] = 3;
  EXPECT_EQ(error_of([&] { Attach::from_json(body); }),
            "attach.replica: expected a map, found number");
}

TEST(Messages, GraphUploadCarriesTheStartPlacementByDeviceName) {
  const OpGraph g = testing::chain(4);
  const DeviceSet d = testing::devices(2);
  Placement start = Placement::single(g, 0);
  start.device_of_op[3] = 1;
  const GraphUpload u{g, start};
  const GraphUpload v = GraphUpload::from_json(over_the_wire(u.to_json(d)), d);
  EXPECT_EQ(v.graph.fingerprint(), g.fingerprint());
  ASSERT_TRUE(v.start.has_value());
  EXPECT_EQ(v.start->device_of_op, start.device_of_op);
  EXPECT_FALSE(
      GraphUpload::from_json(GraphUpload{g, std::nullopt}.to_json(d), d).start.has_value());
  // A placement on a device the job does not have.
  EXPECT_EQ(error_of([&] {
              GraphUpload::from_json(u.to_json(d), testing::devices(1));
            }).rfind("graph_upload.placement: ", 0),
            0u);
  EXPECT_EQ(error_of([&] {
              GraphUpload::from_json({{"graph", 1}}, d);
            }).rfind("graph_upload.graph: ", 0),
            0u);
}

TEST(Messages, DirectiveRoundTripsWithItsReasonAndState) {
  const OpGraph g = testing::chain(3);
  const DeviceSet d = testing::devices(2);
  Directive a;
  a.placement_id = 7;
  a.reason = Reason::kReexplore;
  a.state = JobState::kReexploring;
  a.profile = true;
  a.after_step = 41;
  a.placement = Placement::single(g, 1);
  const json body = over_the_wire(a.to_json(d));
  EXPECT_EQ(body["reason"], "re-explore");
  EXPECT_EQ(body["state"], "re-exploring");
  const Directive b = Directive::from_json(body, g, d);
  EXPECT_EQ(b.placement_id, 7u);
  EXPECT_EQ(b.reason, Reason::kReexplore);
  EXPECT_EQ(b.state, JobState::kReexploring);
  EXPECT_TRUE(b.profile);
  EXPECT_EQ(b.after_step, std::optional<uint64_t>(41));
  EXPECT_EQ(b.placement.device_of_op, a.placement.device_of_op);

  json v1 = body;  // a protocol 1 daemon sends no "profile"; a reply carries no "after_step"
  v1.erase("profile");
  v1.erase("after_step");
  EXPECT_FALSE(Directive::from_json(v1, g, d).profile);
  EXPECT_FALSE(Directive::from_json(v1, g, d).after_step.has_value());
  a.after_step.reset();
  EXPECT_FALSE(over_the_wire(a.to_json(d)).contains("after_step"));
  json wrong = body;
  wrong["state"] = "dreaming";
  EXPECT_EQ(error_of([&] { Directive::from_json(wrong, g, d); }),
            "placement_directive.state: 'dreaming' is not a job state");
}

TEST(Messages, AStepReportIsCheckedAndItsErrorMadeSafeForLogsAndTerminals) {
  const StepReport m{7, 42, 0.125, false, "out of memory on cpu:1"};
  EXPECT_EQ(StepReport::from_json(over_the_wire(m.to_json())), m);
  // A time is a reward: a step that ran in 0 s, or in no finite time, would be a best nothing
  // beats. Its error reaches the log and terminals as one line that does nothing to them.
  EXPECT_EQ(StepReport::from_json(
                StepReport{7, 42, 0.0, false, "Traceback:\n  x\x1b[2J\xc2\x9b"}.to_json())
                .error,
            "Traceback:\\n  x\\x1B[2J\\u009B");
  json raw = StepReport{7, 42, 0.0, false, ""}.to_json();
  raw["error"] =
      "lone \x9b"
      "[2J and \xff, kept: 训练";  // over CBOR a string is bytes
  EXPECT_EQ(StepReport::from_json(raw).error, "lone \\x9B[2J and \\xFF, kept: 训练");
  const StepReport failed{7, 43, 0.0, false, "migration: out of memory"};
  EXPECT_EQ(StepReport::from_json(failed.to_json()), failed);
  EXPECT_EQ(error_of([] {
              StepReport::from_json(StepReport{7, 44, 0.0, true, ""}.to_json());
            }),
            "step_report.step_time_s: must be > 0 for a step that ran (ok)");
  for (double bad : {std::numeric_limits<double>::infinity(), -1.0, std::nan("")}) {
    json doc = StepReport{7, 45, 1.0, true, ""}.to_json();
    doc["step_time_s"] = bad;
    EXPECT_EQ(error_of([&] { StepReport::from_json(doc); }),
              "step_report.step_time_s: must be a finite number >= 0")
        << bad;
  }
  StepReport profiled{7, 42, 0.5, true, ""};
  profiled.profiled = true;
  EXPECT_EQ(StepReport::from_json(profiled.to_json()), profiled);
  const StepReport plain{7, 42, 0.5, true, ""};
  EXPECT_FALSE(plain.to_json().contains("profiled")) << "protocol 1 daemons see no new key";
  // On the wire a key this version does not know is ignored: a newer SDK's report still counts.
  json newer = m.to_json();
  newer["queue_wait_s"] = 0.001;
  EXPECT_EQ(StepReport::from_json(newer), m);
}

TEST(Messages, AProfileReportRoundTripsAppliesToTheGraphAndIgnoresUnknownKeys) {
  ProfileReport r;
  r.placement_id = 4;
  r.steps = 3;
  r.ops = {{0, "cpu", {0.001, 0.002, 0.0005, 4096}}, {2, "cuda", {0.0001, 0.0002, 0.0, 0}}};
  EXPECT_EQ(ProfileReport::from_json(over_the_wire(r.to_json())), r);
  EXPECT_FALSE(r.to_json().contains("peak_bytes")) << "sent only when measured";
  r.peak_bytes = {5u << 20, 0};
  EXPECT_EQ(ProfileReport::from_json(over_the_wire(r.to_json())), r);
  EXPECT_FALSE(r.to_json().contains("held_bytes")) << "sent only when measured";
  r.held_bytes = {{1000, 10, 1000, 2000, 0, 4096}, {0, 0, 0, 0, 1000, 0}};
  EXPECT_EQ(ProfileReport::from_json(over_the_wire(r.to_json())), r);

  OpGraph g = testing::chain(3);
  r.apply(g);
  EXPECT_EQ(g.ops[0].profile.at("cpu"), (OpProfile{0.001, 0.002, 0.0005, 4096}));
  EXPECT_EQ(g.ops[2].profile.count("cuda"), 1u);
  EXPECT_TRUE(g.ops[1].profile.empty());
  r.ops.push_back({3, "cpu", {}});
  OpGraph untouched = testing::chain(3);
  EXPECT_THROW(r.apply(untouched), std::invalid_argument);
  EXPECT_EQ(untouched, testing::chain(3)) << "nothing applied when an entry does not fit";

  json doc = r.to_json();
  doc["ops"][1]["kind"] = "tpu";
  EXPECT_NE(error_of([&] { ProfileReport::from_json(doc); }).find("profile_report.ops[1].kind: "),
            std::string::npos);
  doc = r.to_json();
  doc["ops"][0]["backward_s"] = -1.0;
  EXPECT_EQ(error_of([&] { ProfileReport::from_json(doc); }),
            "profile_report.ops[0]: times must be >= 0");
  doc = r.to_json();
  doc["ops"][0]["op"] = -2;
  EXPECT_EQ(error_of([&] { ProfileReport::from_json(doc); }),
            "profile_report.ops[0].op: must be >= 0");
  doc = r.to_json();
  doc["peak_bytes"][1] = -1;
  EXPECT_NE(error_of([&] { ProfileReport::from_json(doc); }).find("profile_report.peak_bytes[1]"),
            std::string::npos);
  doc = r.to_json();
  doc["held_bytes"][0]["optimizer_state"] = "lots";
  EXPECT_NE(error_of([&] {
              ProfileReport::from_json(doc);
            }).find("profile_report.held_bytes[0].optimizer_state"),
            std::string::npos)
      << error_of([&] { ProfileReport::from_json(doc); });
  // A kind a newer SDK counts, and a kind it leaves out, are no error.
  doc = r.to_json();
  doc["held_bytes"][1]["workspace"] = 7;
  doc["held_bytes"][1].erase("copies");
  ProfileReport partial = r;
  partial.held_bytes[1].copies = 0;
  EXPECT_EQ(ProfileReport::from_json(doc), partial);
  // A key this version does not know, in the report or an entry, is ignored.
  r.ops.pop_back();
  doc = r.to_json();
  doc["queue"] = "train";
  doc["ops"][0]["launches"] = 3;
  EXPECT_EQ(ProfileReport::from_json(doc), r);
}

TEST(Messages, RepliesRoundTrip) {
  const Welcome w = Welcome::from_json(
      over_the_wire(Welcome{2, "placementd 0.1.0", 1u << 16, 1000, true}.to_json()));
  EXPECT_EQ(w.version, 2);
  EXPECT_EQ(w.server, "placementd 0.1.0");
  EXPECT_EQ(w.max_frame_bytes, 1u << 16);
  EXPECT_EQ(w.uid, 1000u);
  EXPECT_TRUE(w.admin);

  const Attached at = Attached::from_json(
      over_the_wire(Attached{4, "metis", "seq2seq", "ppo", 5, 1, 100, {"a notice"}}.to_json()));
  EXPECT_EQ(at.session, 4u);
  EXPECT_EQ(at.placer, "seq2seq");
  EXPECT_EQ(at.max_candidates, 100);
  EXPECT_EQ(at.notices, std::vector<std::string>{"a notice"});
  // An older daemon's reply has no notices.
  nlohmann::json older = Attached{4, "metis", "seq2seq", "ppo", 5, 1, 100, {}}.to_json();
  older.erase("notices");
  EXPECT_TRUE(Attached::from_json(over_the_wire(older)).notices.empty());

  const GraphAccepted ga = GraphAccepted::from_json(
      over_the_wire(GraphAccepted{"abc", 10, 9, 3, true, false}.to_json()));
  EXPECT_EQ(ga.fingerprint, "abc");
  EXPECT_EQ(ga.edges, 9u);
  EXPECT_TRUE(ga.cached);
  EXPECT_FALSE(ga.policy_resumed);

  Detached none = Detached::from_json(over_the_wire(Detached{}.to_json()));
  EXPECT_FALSE(none.best_step_time_s.has_value());
  const Detached some = Detached::from_json(over_the_wire(Detached{0.25, true}.to_json()));
  EXPECT_DOUBLE_EQ(*some.best_step_time_s, 0.25);
  EXPECT_TRUE(some.persisted);

  const Error e =
      Error::from_json(over_the_wire(Error{protocol::error::kBusy, "full", true}.to_json()));
  EXPECT_EQ(e.code, "busy");
  EXPECT_EQ(e.message, "full");
  EXPECT_TRUE(e.fatal);

  EXPECT_EQ(Reloaded::from_json(Reloaded{"/etc/p.toml", 20}.to_json()).plugins, 20u);
}

// The rules every codec follows, since each is derived from its message's field table.
TEST(Messages, EncodersLeaveOutWhatAnOlderPeerLacksAndDecodersIgnoreWhatTheyDoNotKnow) {
  Attach a;
  a.job = "lm";
  a.devices = testing::devices(1);
  a.profile_steps = 3;
  a.replica = ReplicaInfo{0, 2, "g"};
  const json v1 = a.to_json(1), v2 = a.to_json(2), v4 = a.to_json(4);
  EXPECT_FALSE(v1.contains("profile_steps"));
  EXPECT_FALSE(v1.contains("replica"));
  EXPECT_EQ(v2.at("profile_steps"), 3);
  EXPECT_FALSE(v2.contains("replica"));
  EXPECT_EQ(v4.at("replica").at("group"), "g");
  EXPECT_EQ(a.to_json(), v4) << "the newest version by default";

  StepReport m{7, 12, 0.25, true, "", true};
  EXPECT_FALSE(m.to_json(1).contains("profiled"));
  EXPECT_TRUE(m.to_json(2).at("profiled").get<bool>());

  // Unknown keys are ignored on the way in, by requests and replies alike.
  json body = v4;
  body["from_a_newer_sdk"] = {{"anything", 1}};
  EXPECT_EQ(Attach::from_json(body).job, "lm");
  body = m.to_json();
  body["gpu_util"] = 0.5;
  EXPECT_EQ(StepReport::from_json(body), m);
  Welcome w;
  w.version = 4;
  body = w.to_json();
  body["features"] = json::array({"x"});
  EXPECT_EQ(Welcome::from_json(body).version, 4);

  // null is "none" only where a field may be none.
  Detached d;
  EXPECT_TRUE(d.to_json().at("best_step_time_s").is_null());
  EXPECT_FALSE(Detached::from_json(d.to_json()).best_step_time_s.has_value());
  body = m.to_json();
  body["step"] = nullptr;
  EXPECT_EQ(error_of([&] { StepReport::from_json(body); }),
            "step_report.step: expected a non-negative integer, found null");
  // A required key names itself when missing; an optional one keeps its default.
  body = w.to_json();
  body.erase("version");
  EXPECT_EQ(error_of([&] { Welcome::from_json(body); }), "welcome: missing required key 'version'");
  EXPECT_EQ(Error::from_json(json::object()).code, "unknown");
  EXPECT_EQ(error_of([] {
              Hello::from_json({{"min_version", 1}, {"max_version", 70000}});
            }),
            "hello.max_version: integer out of range: 70000");
}

TEST(Messages, GraphUploadLeavesOpWorkOutForDaemonsBeforeVersion3) {
  GraphUpload upload;
  upload.graph = testing::chain(2);
  upload.graph.ops[1].work = OpWork{};
  const DeviceSet devices = testing::devices(1);
  EXPECT_EQ(GraphUpload::from_json(upload.to_json(devices), devices).graph, upload.graph);
  const json old = upload.to_json(devices, 2);
  EXPECT_FALSE(old["graph"]["ops"][1].contains("work"));
  EXPECT_FALSE(GraphUpload::from_json(old, devices).graph.ops[1].work);
}

TEST(Messages, AStepsErrorIsKeptToItsFirstBytesAndNamesAreBounded) {
  // A megabyte of traceback, with a line break in what is kept: a few KiB come through, on one
  // line, saying how much was left out.
  StepReport report;
  report.ok = false;
  report.error = "Traceback:\n" + std::string(1 << 20, 'x');
  const StepReport read = StepReport::from_json(over_the_wire(report.to_json()));
  EXPECT_LE(read.error.size(), StepReport::kMaxError + 32);
  EXPECT_EQ(read.error.rfind("Traceback:\\nxxx", 0), 0u) << read.error.substr(0, 40);
  EXPECT_NE(read.error.find(" more bytes]"), std::string::npos);
  EXPECT_EQ(read.error.find('\n'), std::string::npos);
  // A name longer than anything a person reads is refused, saying so.
  Attach attach;
  attach.job = "job";
  attach.devices = testing::devices(1);
  json body = attach.to_json();
  body["sdk_version"] = std::string(5000, 'v');
  try {
    Attach::from_json(body);
    ADD_FAILURE() << "a 5000-byte version string was taken";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "attach.sdk_version: is 5000 bytes long; names are at most 1024"),
              std::string::npos)
        << e.what();
  }
}

TEST(Messages, GraphUploadLeavesResidenceOutForDaemonsBeforeVersion5) {
  GraphUpload upload;
  upload.graph = testing::chain(2);
  upload.graph.parameters = {{"w", 64, {0, 1}}};
  Placement start{{0, 0}};
  start.residence.parameters = {{1, Fetch::kStream}};
  upload.start = start;
  const DeviceSet devices = testing::devices(2);
  const GraphUpload now = GraphUpload::from_json(upload.to_json(devices), devices);
  EXPECT_EQ(now.graph, upload.graph);
  EXPECT_EQ(now.start, upload.start);
  const json old = upload.to_json(devices, protocol::kResidenceVersion - 1);
  EXPECT_FALSE(old["graph"].contains("parameters"));
  EXPECT_FALSE(old["placement"].contains("residence"));
  const GraphUpload then = GraphUpload::from_json(old, devices);
  EXPECT_TRUE(then.graph.parameters.empty());
  EXPECT_EQ(then.start->device_of_op, start.device_of_op);
  EXPECT_TRUE(then.start->residence.is_default());
}

TEST(Messages, ADirectiveCarriesItsPlacementsResidence) {
  OpGraph graph = testing::chain(3);
  graph.parameters = {{"w", 64, {1}}};
  const DeviceSet devices = testing::devices(2);
  Directive d;
  d.placement_id = 4;
  d.placement = Placement{{0, 0, 0}};
  d.placement.residence.parameters = {{1, Fetch::kPersist}};
  d.placement.residence.activations = {{}, {ActivationPolicy::kOffload, 1}, {}};
  EXPECT_EQ(Directive::from_json(over_the_wire(d.to_json(devices)), graph, devices).placement,
            d.placement);
}

// `doc` with a key no decoder knows added to every object in it, at every depth; `added` counts
// them.
json with_unknown_keys(json doc, int& added) {
  if (doc.is_object()) {
    for (auto& item : doc.items()) item.value() = with_unknown_keys(item.value(), added);
    doc["from_a_newer_peer"] = {{"nested", json::array({1, "two"})}};
    ++added;
  } else if (doc.is_array()) {
    for (json& element : doc) element = with_unknown_keys(element, added);
  }
  return doc;
}

// The protocol's one rule (docs/protocol.md): a message is read ignoring keys it does not know at
// every depth, the graph, the devices and the placement nested in it included; the same documents
// read as files refuse them.
TEST(Messages, EveryDecoderReachedFromAMessageIgnoresUnknownKeysAtEveryDepthAndFilesRefuseThem) {
  OpGraph g = testing::two_chains(2);
  for (Op& op : g.ops) op.profile["cpu"] = {0.001, 0.002, 0.0, 64};
  g.ops[0].work = OpWork{};
  g.ops[0].work->forward_flops = 1e6;
  g.ops[0].parameter_bytes = 64;
  g.parameters = {{"tower0.layer.0.weight", 64, {0}}};
  DeviceSet devices = testing::devices(2);
  DeviceSpec spec;
  spec.fp32_flops = 1e12;
  spec.memory_bandwidth = 1e11;
  devices.devices[0].spec = spec;
  Placement start = Placement::single(g, 0);
  start.residence.parameters = {{1, Fetch::kStream}};
  start.residence.activations.resize(g.ops.size());
  start.residence.activations[1] = {ActivationPolicy::kOffload, 1};
  int added = 0;

  const json upload = GraphUpload{g, start}.to_json(devices);
  const GraphUpload read =
      GraphUpload::from_json(over_the_wire(with_unknown_keys(upload, added)), devices);
  EXPECT_EQ(read.graph, GraphUpload::from_json(upload, devices).graph);
  EXPECT_EQ(read.start, start);
  // The message, the graph, each op, its outputs, profiles and work, each parameter, the placement
  // and its residence.
  EXPECT_GE(added, 1 + 1 + 5 * 3 + 1 + 1 + 1 + 1) << "keys added";

  Attach attach;
  attach.job = "j";
  attach.devices = devices;
  added = 0;
  const Attach attached =
      Attach::from_json(over_the_wire(with_unknown_keys(attach.to_json(), added)));
  EXPECT_GE(added, 4) << "the message, the device set, each device, the spec";
  ASSERT_EQ(attached.devices.size(), 2u);
  EXPECT_EQ(to_json(attached.devices), to_json(devices));

  Directive d;
  d.placement_id = 7;
  d.placement = start;
  added = 0;
  EXPECT_EQ(
      Directive::from_json(over_the_wire(with_unknown_keys(d.to_json(devices), added)), g, devices)
          .placement,
      start);
  EXPECT_GE(added, 3) << "the message, the placement, its residence";

  StepReport step;
  step.placement_id = 7;
  step.step = 3;
  step.step_time_s = 0.5;
  step.ok = true;
  added = 0;
  EXPECT_EQ(StepReport::from_json(over_the_wire(with_unknown_keys(step.to_json(), added))), step);

  // As files, the same documents are refused at the first unknown key, by its path.
  added = 0;
  EXPECT_NE(error_of([&] {
              graph_from_json(with_unknown_keys(to_json(g), added));
            }).find("unknown key 'from_a_newer_peer'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              devices_from_json(with_unknown_keys(to_json(devices), added));
            }).find("unknown key 'from_a_newer_peer'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              placement_from_json(with_unknown_keys(to_json(start, devices), added), g, devices);
            }).find("unknown key 'from_a_newer_peer'"),
            std::string::npos);
  // A profile on a kind of device this build does not know is passed over in a message, refused
  // in a file.
  json graph_doc = to_json(g);
  graph_doc["ops"][0]["profile"]["tpu"] = {{"forward_s", 1.0}, {"backward_s", 2.0}};
  GraphUpload newer_kind{g, std::nullopt};
  json newer = newer_kind.to_json(devices);
  newer["graph"] = graph_doc;
  EXPECT_EQ(GraphUpload::from_json(over_the_wire(newer), devices).graph.ops[0].profile.count("tpu"),
            0u);
  EXPECT_NE(error_of([&] { graph_from_json(graph_doc); }).find("ops[0].profile: unknown key 'tpu'"),
            std::string::npos);
}

TEST(Messages, RequestsRoundTrip) {
  const Hello h = Hello::from_json(Hello{1, 2, "placementctl"}.to_json());
  EXPECT_EQ(h.min_version, 1);
  EXPECT_EQ(h.max_version, 2);
  EXPECT_EQ(h.client, "placementctl");
  EXPECT_EQ(error_of([] {
              Hello::from_json({{"min_version", 1}, {"max_version", 70000}});
            }),
            "hello.max_version: integer out of range: 70000");
  const ListJobs l = ListJobs::from_json(ListJobs{true, false}.to_json());
  EXPECT_TRUE(l.all);
  EXPECT_FALSE(l.finished);
  EXPECT_FALSE(ListJobs::from_json(json::object()).all);
  EXPECT_EQ(JobShow::from_json(JobShow{12}.to_json()).id, 12u);
  EXPECT_EQ(error_of([] {
              JobShow::from_json({{"id", "twelve"}});
            }),
            "job_show.id: expected a non-negative integer, found string");
  EXPECT_EQ(PlacementRequest{}.to_json(), json::object());
  EXPECT_EQ(Detach{}.to_json(), json::object());
}

}  // namespace
}  // namespace placement::messages
