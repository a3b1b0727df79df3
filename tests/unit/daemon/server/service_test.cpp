// The Service as the socket code drives it, without a socket: frames in through handle(), the
// answers collected from the Responder, with real plugins and a real store.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "built_plugins.h"
#include "placement/serialization.h"
#include "server/service.h"
#include "test_graphs.h"
#include "test_store.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;
namespace msg = placement::messages;
namespace error = placement::protocol::error;
using nlohmann::json;
using placement::protocol::MessageType;
using namespace std::chrono_literals;

struct Frame {
  MessageType type;
  uint32_t id;
  json body;
  bool close;
};

// What one connection received, in order; handlers off the I/O thread answer later.
class Inbox {
 public:
  Responder responder() {
    return [this](MessageType type, uint32_t id, json body, bool close) {
      std::lock_guard<std::mutex> lock(mutex_);
      frames_.push_back({type, id, std::move(body), close});
      arrived_.notify_all();
    };
  }
  // The next frame; a test failure if none comes within `timeout`.
  Frame next(std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!arrived_.wait_for(lock, timeout, [this] { return !frames_.empty(); })) {
      ADD_FAILURE() << "no frame arrived";
      return {MessageType::kError, 0, json::object(), false};
    }
    Frame f = std::move(frames_.front());
    frames_.pop_front();
    return f;
  }
  size_t pending() {
    std::lock_guard<std::mutex> lock(mutex_);
    return frames_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Frame> frames_;
};

// One client connection: its state as the server keeps it, and what it received.
struct Client {
  ConnectionState conn;
  Inbox inbox;
  Responder respond = inbox.responder();
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = std::make_shared<Config>(default_config(PLUGIN_DIR));
    config->path = "test.toml";
    config->admin_group = "placement-admins";
    // The throwing test plugins throw nowhere by default: a random placer and a random search.
    config->policy.grouper = "none";
    config->policy.placer = "throwing";
    config->policy.algorithm = "throwing";
    config->exploration.steps_per_candidate = 2;
    config->exploration.warmup_steps = 0;
    config->exploration.max_candidates = 6;
    config->exploration.max_overhead_fraction = 1.0;
    service = std::make_unique<Service>(config, built_and_test_plugins(), *store, "/test.sock");
  }
  void TearDown() override { service.reset(); }

  // As the server hands a frame over: weighed, and decoded here or where its handler runs.
  void send(Client& c, MessageType type, uint32_t id, json body) {
    send_bytes(c, type, id, json::to_cbor(body));
  }
  void send_bytes(Client& c, MessageType type, uint32_t id, std::vector<uint8_t> payload) {
    const placement::protocol::PayloadWeight weight =
        placement::protocol::weigh_payload(payload.data(), payload.size());
    if (service->decodes_where_it_runs(c.conn, type)) {
      service->handle_payload(c.conn, type, id, std::move(payload), weight, c.respond);
      return;
    }
    service->handle(c.conn, type, id,
                    placement::protocol::decode_payload(payload.data(), payload.size(), weight),
                    c.respond, weight.decoded_bytes);
  }
  // Sends a request and returns the frame that answers it.
  Frame ask(Client& c, MessageType type, uint32_t id, json body = json::object()) {
    send(c, type, id, std::move(body));
    return c.inbox.next();
  }
  void hello(Client& c, uint16_t max_version = placement::protocol::kMaxVersion) {
    msg::Hello h;
    h.max_version = max_version;
    h.client = "service_test";
    const Frame f = ask(c, MessageType::kHello, 1, h.to_json());
    ASSERT_EQ(f.type, MessageType::kWelcome) << f.body.dump();
  }
  void attach(Client& c, const std::string& job) {
    msg::Attach a;
    a.job = job;
    a.devices = placement::testing::devices(2);
    const Frame f = ask(c, MessageType::kAttach, 2, a.to_json());
    ASSERT_EQ(f.type, MessageType::kAttached) << f.body.dump();
  }
  // Hello, attach and the graph: a job ready to ask for its placement.
  void start_job(Client& c, const std::string& job) {
    hello(c);
    attach(c, job);
    msg::GraphUpload upload;
    upload.graph = graph;
    const Frame f =
        ask(c, MessageType::kGraphUpload, 3, upload.to_json(placement::testing::devices(2)));
    ASSERT_EQ(f.type, MessageType::kGraphAccepted) << f.body.dump();
  }
  // An error frame's code, message and fatality, checked against what the test expects.
  static void expect_error(const Frame& f, const char* code, const std::string& text,
                           bool fatal = false) {
    ASSERT_EQ(f.type, MessageType::kError)
        << placement::protocol::to_string(f.type) << " " << f.body.dump();
    const msg::Error e = msg::Error::from_json(f.body);
    EXPECT_EQ(e.code, code) << e.message;
    EXPECT_NE(e.message.find(text), std::string::npos) << e.message;
    EXPECT_EQ(e.fatal, fatal);
    EXPECT_EQ(f.close, fatal);
  }

  testing::TestStore store{"service_test"};
  std::unique_ptr<Service> service;
  const placement::OpGraph graph = placement::testing::chain(4, 1024);
};

// The I/O thread every connection shares decodes only the hello and what runs there; a job's
// frames are decoded where their handlers run, in their user's turn, and what is wrong with one is
// answered from there as it was from the I/O thread.
TEST_F(ServiceTest, AJobsFramesAreDecodedWhereTheirHandlersRunAndAnsweredAsBefore) {
  Client c;
  EXPECT_FALSE(service->decodes_where_it_runs(c.conn, MessageType::kHello));
  EXPECT_FALSE(service->decodes_where_it_runs(c.conn, MessageType::kStepReport)) << "before hello";
  start_job(c, "decoded-late");
  EXPECT_TRUE(service->decodes_where_it_runs(c.conn, MessageType::kStepReport));
  EXPECT_TRUE(service->decodes_where_it_runs(c.conn, MessageType::kGraphUpload));
  send_bytes(c, MessageType::kStepReport, 7, {0xa1, 0x61});  // a map whose key breaks off
  expect_error(c.inbox.next(), error::kBadPayload, "");
  send_bytes(c, MessageType::kStepReport, 8, json::to_cbor(json::array({1, 2})));
  expect_error(c.inbox.next(), error::kBadPayload, "payload must be a map");
  // A graph over [limits] is counted before it is decoded and refused; the job goes on.
  auto strict = std::make_shared<Config>(*service->config());
  strict->limits.max_graph_ops = 2;
  service->set_config(strict);
  msg::GraphUpload upload;
  upload.graph = graph;
  expect_error(ask(c, MessageType::kGraphUpload, 9, upload.to_json(placement::testing::devices(2))),
               error::kOverLimit, "graph has 4 ops; [limits] max_graph_ops = 2");
  const Frame status = ask(c, MessageType::kStatus, 10);
  EXPECT_EQ(status.type, MessageType::kStatusReply) << status.body.dump();
}

TEST_F(ServiceTest, EveryRequestTypeHasAHandlerAndNoReplyTypeDoes) {
  for (MessageType type : placement::protocol::known_types())
    EXPECT_EQ(service->handlers().find(type) != nullptr, placement::protocol::is_request(type))
        << placement::protocol::to_string(type);
  Client c;
  hello(c);
  expect_error(ask(c, MessageType::kWelcome, 5), error::kUnexpected,
               "welcome is a reply, not a request");
}

TEST_F(ServiceTest, TheFirstFrameMustBeHello) {
  Client c;
  expect_error(ask(c, MessageType::kStatus, 1), error::kUnexpected,
               "the first frame must be hello, got status", true);
  EXPECT_EQ(c.conn.version, 0);
}

TEST_F(ServiceTest, HelloAgreesOnTheHighestCommonVersionOnce) {
  Client c;
  const Frame welcome = ask(c, MessageType::kHello, 7, msg::Hello{1, 9, "x"}.to_json());
  ASSERT_EQ(welcome.type, MessageType::kWelcome);
  EXPECT_EQ(welcome.id, 7u);
  EXPECT_EQ(msg::Welcome::from_json(welcome.body).version, placement::protocol::kMaxVersion);
  EXPECT_EQ(c.conn.version, placement::protocol::kMaxVersion);
  expect_error(ask(c, MessageType::kHello, 8, msg::Hello{1, 2, "x"}.to_json()), error::kUnexpected,
               "hello was already received");

  Client future;
  expect_error(ask(future, MessageType::kHello, 1, msg::Hello{90, 99, "x"}.to_json()),
               error::kUnsupportedVersion, "client speaks protocol versions 90..99", true);
  Client garbled;
  expect_error(ask(garbled, MessageType::kHello, 1, {{"min_version", "one"}}), error::kBadPayload,
               "hello: ", true);
  Client not_a_map;
  expect_error(ask(not_a_map, MessageType::kHello, 1, json::array()), error::kBadPayload,
               "payload must be a map");
}

TEST_F(ServiceTest, RequestsOutOfTurnAreRefusedWithWhatToDoFirst) {
  Client c;
  hello(c);
  expect_error(ask(c, MessageType::kGraphUpload, 3), error::kUnexpected,
               "attach before uploading a graph");
  expect_error(ask(c, MessageType::kStepReport, 4), error::kUnexpected,
               "attach before sending a step report");
  expect_error(ask(c, MessageType::kDetach, 5), error::kUnexpected, "attach before detaching");
  attach(c, "early");
  expect_error(ask(c, MessageType::kAttach, 6, {{"job", "again"}}), error::kUnexpected,
               "this connection is already attached as job 1");
  // Refused by the job's session, on its strand: the same kind of answer.
  expect_error(ask(c, MessageType::kPlacementRequest, 7), error::kUnexpected,
               "upload the graph before requesting a placement");
}

TEST_F(ServiceTest, AProfileReportNeedsProtocolTwo) {
  Client c;
  hello(c, 1);
  attach(c, "old-sdk");
  expect_error(ask(c, MessageType::kProfileReport, 4), error::kUnexpected,
               "profile_report needs protocol version 2");
}

TEST_F(ServiceTest, AJobGoesFromAttachToDetachAndIsCounted) {
  Client c;
  start_job(c, "train");
  ASSERT_TRUE(c.conn.job);
  EXPECT_EQ(service->session_count(), 1u);
  Frame first = ask(c, MessageType::kPlacementRequest, 4);
  ASSERT_EQ(first.type, MessageType::kPlacementDirective) << first.body.dump();
  const uint64_t id = first.body.at("placement_id").get<uint64_t>();

  // Step reports are one-way; the next candidate comes pushed, with request id 0.
  for (uint64_t step = 0; step < 3; ++step)
    send(c, MessageType::kStepReport, 0,
         placement::messages::StepReport{id, step, 0.5, true, ""}.to_json());
  const Frame pushed = c.inbox.next();
  ASSERT_EQ(pushed.type, MessageType::kPlacementDirective) << pushed.body.dump();
  EXPECT_EQ(pushed.id, 0u);
  EXPECT_NE(pushed.body.at("placement_id").get<uint64_t>(), id);

  // The job's own listing runs behind its reports on its strand: they are all counted.
  const Frame jobs = ask(c, MessageType::kListJobs, 9);
  ASSERT_EQ(jobs.type, MessageType::kJobList);
  ASSERT_EQ(jobs.body["jobs"].size(), 1u);
  EXPECT_EQ(jobs.body["jobs"][0]["name"], "train") << jobs.body.dump();

  const Frame detached = ask(c, MessageType::kDetach, 10);
  ASSERT_EQ(detached.type, MessageType::kDetached) << detached.body.dump();
  EXPECT_TRUE(msg::Detached::from_json(detached.body).persisted);
  EXPECT_FALSE(c.conn.job) << "the connection is free to attach again";
  EXPECT_EQ(service->session_count(), 0u);

  const Frame status = ask(c, MessageType::kStatus, 11);
  ASSERT_EQ(status.type, MessageType::kStatusReply);
  EXPECT_EQ(status.body["reports_received"], 3);
  EXPECT_EQ(status.body["frames_received"], 10)
      << "hello, attach, graph, request, 3 reports, jobs, detach, status";
  EXPECT_EQ(status.body["protocol_errors"], 0);
  EXPECT_EQ(status.body["config"], "test.toml");
  EXPECT_EQ(status.body["socket"], "/test.sock");

  const Frame finished = ask(c, MessageType::kListJobs, 12, msg::ListJobs{false, true}.to_json());
  ASSERT_EQ(finished.body["jobs"].size(), 1u) << finished.body.dump();
  EXPECT_EQ(finished.body["jobs"][0]["state"], "detached");
}

// What a job says at attach reaches its session as it was sent, every field, with only the node's
// device figures filled in where the job sent none.
TEST_F(ServiceTest, AnAttachReachesItsSessionWhole) {
  auto config = std::make_shared<Config>(*service->config());
  config->cpu_spec = placement::DeviceSpec{};
  config->cpu_spec->fp32_flops = 3.1e12;  // the node's figures ([devices] cpu_spec)
  config->cpu_spec->memory_bandwidth = 9e10;
  service->set_config(config);
  Client c;
  hello(c);
  msg::Attach a;
  a.job = "whole";
  a.devices = placement::testing::devices(2);
  a.devices.devices[0].spec = placement::DeviceSpec{};
  a.devices.devices[0].spec->fp32_flops = 1.25e12;  // the job's own figures
  a.devices.devices[0].spec->memory_bandwidth = 5e10;
  a.devices.devices[0].spec->launch_s = 2e-6;
  a.devices.devices[1].spec.reset();
  a.sdk_version = "9.8.7";
  a.torch_version = "2.11.0+test";
  a.expected_steps = 12345;
  a.profile_steps = 4;
  a.replica = msg::ReplicaInfo{0, 2, "10.0.0.1:29500/0badf00d"};
  const Frame f = ask(c, MessageType::kAttach, 2, a.to_json());
  ASSERT_EQ(f.type, MessageType::kAttached) << f.body.dump();
  ASSERT_TRUE(c.conn.job);
  const JobIdentity& job = c.conn.job->live.job();
  EXPECT_EQ(job.name(), "whole");
  EXPECT_EQ(job.uid, c.conn.peer.uid);
  EXPECT_EQ(job.protocol_version, placement::protocol::kMaxVersion);
  const msg::Attach& got = job.attach;
  EXPECT_EQ(got.sdk_version, "9.8.7");
  EXPECT_EQ(got.torch_version, "2.11.0+test");
  EXPECT_EQ(got.expected_steps, 12345u);
  EXPECT_EQ(job.profile_steps(), 4);
  ASSERT_TRUE(got.replica);
  EXPECT_EQ(got.replica->to_json(), a.replica->to_json());
  ASSERT_EQ(got.devices.size(), 2u);
  ASSERT_TRUE(got.devices.devices[0].spec && got.devices.devices[1].spec);
  EXPECT_EQ(got.devices.devices[0].spec->fp32_flops, 1.25e12) << "the job's own kept";
  EXPECT_EQ(got.devices.devices[1].spec->fp32_flops, 3.1e12) << "the node's cpu_spec filled in";
  // Apart from that figure, the session holds the message the job sent.
  msg::Attach filled = a;
  filled.devices.devices[1].spec = got.devices.devices[1].spec;
  EXPECT_EQ(got.to_json(), filled.to_json());
}

TEST_F(ServiceTest, AJobTooShortForItsExplorationIsToldSoInTheAttachReply) {
  Client c;
  hello(c);
  msg::Attach a;
  a.job = "short";
  a.devices = placement::testing::devices(2);
  a.expected_steps = 10;  // the fixture's exploration needs 7 placements × 2 steps
  const Frame f = ask(c, MessageType::kAttach, 2, a.to_json());
  ASSERT_EQ(f.type, MessageType::kAttached) << f.body.dump();
  const msg::Attached attached = msg::Attached::from_json(f.body);
  ASSERT_EQ(attached.notices.size(), 1u) << f.body.dump();
  EXPECT_NE(attached.notices[0].find("at least 14 steps"), std::string::npos)
      << attached.notices[0];

  Client unknown;  // a job that does not say how long it runs is paced, not warned
  hello(unknown);
  a.job = "unknown length";
  a.expected_steps = 0;
  const Frame g = ask(unknown, MessageType::kAttach, 2, a.to_json());
  EXPECT_TRUE(msg::Attached::from_json(g.body).notices.empty()) << g.body.dump();
}

TEST_F(ServiceTest, MetricsShowTheCountersTheJobsAndThePolicyLatency) {
  Client c;
  start_job(c, "bert");
  const Frame first = ask(c, MessageType::kPlacementRequest, 4);
  ASSERT_EQ(first.type, MessageType::kPlacementDirective) << first.body.dump();
  const uint64_t id = first.body.at("placement_id").get<uint64_t>();
  for (uint64_t step = 0; step < 2; ++step)
    send(c, MessageType::kStepReport, 0,
         placement::messages::StepReport{id, step, 0.5, true, ""}.to_json());
  // Behind the reports on the job's strand; the next candidate, pushed, may come first.
  Frame jobs = ask(c, MessageType::kListJobs, 9);
  while (jobs.type == MessageType::kPlacementDirective) jobs = c.inbox.next();
  ASSERT_EQ(jobs.type, MessageType::kJobList) << jobs.body.dump();
  const std::string state = jobs.body["jobs"][0]["state"];

  std::string text = service->metrics_text();
  for (const std::string& line :
       {std::string("placementd_jobs 1\n"), std::string("placementd_step_reports_total 2\n"),
        std::string("placementd_protocol_errors_total 0\n"),
        "placementd_job_state{job_id=\"1\",job_name=\"bert\",state=\"" + state + "\"} 1\n",
        std::string("placementd_job_step_time_seconds{job_id=\"1\",job_name=\"bert\",placement="
                    "\"start\"} 0.5\n"),
        std::string("placementd_job_steps_total{job_id=\"1\",job_name=\"bert\"} 2\n"),
        std::string("placementd_job_max_candidates{job_id=\"1\",job_name=\"bert\"} 6\n"),
        std::string("placementd_policy_seconds_count{request=\"step_report\"} 2\n"),
        std::string("placementd_policy_seconds_count{request=\"graph_upload\"} 1\n"),
        std::string("# TYPE placementd_policy_seconds histogram\n")})
    EXPECT_NE(text.find(line), std::string::npos) << line << "not in:\n" << text;
  // Two steps are too few for an interval: none is shown rather than a made-up one.
  EXPECT_EQ(text.find("placementd_job_step_time_low_seconds{"), std::string::npos) << text;

  ASSERT_EQ(ask(c, MessageType::kDetach, 10).type, MessageType::kDetached);
  text = service->metrics_text();
  EXPECT_NE(text.find("placementd_jobs 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("job_name=\"bert\""), std::string::npos)
      << "an ended job's series go with it";
}

TEST_F(ServiceTest, AMalformedReportIsAnsweredAndTheJobGoesOn) {
  Client c;
  start_job(c, "sloppy");
  const Frame first = ask(c, MessageType::kPlacementRequest, 4);
  ASSERT_EQ(first.type, MessageType::kPlacementDirective);
  expect_error(ask(c, MessageType::kStepReport, 5, {{"placement_id", "seven"}}), error::kBadPayload,
               "placement_id");
  const Frame again = ask(c, MessageType::kPlacementRequest, 6);
  ASSERT_EQ(again.type, MessageType::kPlacementDirective);
  EXPECT_EQ(again.body["placement_id"], first.body["placement_id"]);
  EXPECT_EQ(ask(c, MessageType::kStatus, 7).body["protocol_errors"], 1);
}

TEST_F(ServiceTest, ReloadingNeedsAnAdminAndReportsWhatIsWrong) {
  int reloads = 0;
  std::vector<std::string> errors;
  service->set_reload_hook([&] {
    ++reloads;
    return errors;
  });
  Client user;
  user.conn.peer = {1000, 1000, 42, false};
  hello(user);
  expect_error(ask(user, MessageType::kReload, 2), error::kPermissionDenied,
               "reloading the config needs root or the admin group 'placement-admins'");
  EXPECT_EQ(reloads, 0);
  expect_error(ask(user, MessageType::kListJobs, 3, msg::ListJobs{true, false}.to_json()),
               error::kPermissionDenied,
               "listing every user's jobs needs root or the admin group 'placement-admins'");

  Client admin;
  admin.conn.peer = {0, 0, 43, true};
  hello(admin);
  const Frame reloaded = ask(admin, MessageType::kReload, 4);
  ASSERT_EQ(reloaded.type, MessageType::kReloaded) << reloaded.body.dump();
  EXPECT_EQ(msg::Reloaded::from_json(reloaded.body).config, "test.toml");
  errors = {"test.toml:3: [policy].placer: no placer named 'nope'"};
  expect_error(ask(admin, MessageType::kReload, 5), error::kInvalidConfig,
               "test.toml:3: [policy].placer");
  EXPECT_EQ(reloads, 2);
}

TEST_F(ServiceTest, EachUserSeesOnlyTheirOwnJobs) {
  Client alice, bob, admin;
  alice.conn.peer = {1001, 1001, 10, false};
  bob.conn.peer = {1002, 1002, 11, false};
  admin.conn.peer = {0, 0, 12, true};
  start_job(alice, "alice-job");
  start_job(bob, "bob-job");
  hello(admin);
  const uint64_t alices = alice.conn.job->live.id();

  const Frame bobs_view = ask(bob, MessageType::kListJobs, 5);
  ASSERT_EQ(bobs_view.body["jobs"].size(), 1u);
  EXPECT_EQ(bobs_view.body["jobs"][0]["name"], "bob-job");
  expect_error(ask(bob, MessageType::kJobShow, 6, msg::JobShow{alices}.to_json()), error::kNotFound,
               "no job " + std::to_string(alices) + " visible to uid 1002");
  EXPECT_EQ(ask(bob, MessageType::kStatus, 7).body["jobs_total"], nullptr);

  EXPECT_EQ(ask(admin, MessageType::kListJobs, 8, msg::ListJobs{true, false}.to_json())
                .body["jobs"]
                .size(),
            2u);
  const Frame shown = ask(admin, MessageType::kJobShow, 9, msg::JobShow{alices}.to_json());
  ASSERT_EQ(shown.type, MessageType::kJobInfo);
  EXPECT_EQ(shown.body["name"], "alice-job");
  EXPECT_EQ(ask(admin, MessageType::kStatus, 10).body["jobs_total"], 2);
}

TEST_F(ServiceTest, AnotherUsersRequestIsNotQueuedBehindOneUsersFlood) {
  // Alice's four jobs upload 20 000-op graphs at once, each a long hold of a policy thread; then
  // Bob, another user, uploads a small one. With two policy threads, one user holds at most one
  // of them ([daemon] policy_threads_per_uid = 0): Bob's upload runs beside Alice's first and is
  // answered before any of hers, where a queue in arrival order would answer it after three.
  const placement::OpGraph big = placement::testing::chain(20000, 1024);
  std::vector<std::unique_ptr<Client>> alice;
  for (int i = 0; i < 4; ++i) {
    alice.push_back(std::make_unique<Client>());
    alice.back()->conn.peer = {1001, 1001, 10 + i, false};
    hello(*alice.back());
    attach(*alice.back(), "alice-" + std::to_string(i));
  }
  Client bob;
  bob.conn.peer = {1002, 1002, 20, false};
  hello(bob);
  attach(bob, "bob");
  msg::GraphUpload upload;
  upload.graph = big;
  const json big_upload = upload.to_json(placement::testing::devices(2));
  upload.graph = graph;
  const json small_upload = upload.to_json(placement::testing::devices(2));
  // Weighed once, so that the uploads arrive together, as from four processes.
  const std::vector<uint8_t> payload = json::to_cbor(big_upload);
  const uint64_t weight =
      placement::protocol::weigh_payload(payload.data(), payload.size()).decoded_bytes;
  std::vector<json> uploads(alice.size(), big_upload);
  for (size_t i = 0; i < alice.size(); ++i)
    service->handle(alice[i]->conn, MessageType::kGraphUpload, 3, std::move(uploads[i]),
                    alice[i]->respond, weight);
  send(bob, MessageType::kGraphUpload, 3, small_upload);
  const Frame bobs = bob.inbox.next(60s);
  EXPECT_EQ(bobs.type, MessageType::kGraphAccepted) << bobs.body.dump();
  size_t answered = 0;
  for (auto& c : alice) answered += c->inbox.pending();
  EXPECT_EQ(answered, 0u) << "Bob waited behind Alice's uploads";
  for (auto& c : alice) EXPECT_EQ(c->inbox.next(60s).type, MessageType::kGraphAccepted);
}

TEST_F(ServiceTest, AConnectionThatClosesEndsItsJob) {
  Client c;
  start_job(c, "vanishing");
  service->disconnected(c.conn);
  EXPECT_FALSE(c.conn.job);
  // The session ends on its strand, after what the job sent before.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (service->session_count() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(service->session_count(), 0u);
  Client admin;
  admin.conn.peer = {0, 0, 1, true};
  hello(admin);
  const Frame finished = ask(admin, MessageType::kListJobs, 2, msg::ListJobs{true, true}.to_json());
  ASSERT_EQ(finished.body["jobs"].size(), 1u);
  EXPECT_EQ(finished.body["jobs"][0]["state"], "detached");
}

TEST_F(ServiceTest, PersistingAtShutdownAnswersOnceTheFilesAreWritten) {
  std::promise<std::pair<size_t, size_t>> none;
  service->persist_all([&](size_t jobs, size_t written) { none.set_value({jobs, written}); });
  EXPECT_EQ(none.get_future().get(), (std::pair<size_t, size_t>{0, 0}));

  Client c;
  start_job(c, "measured");
  const Frame first = ask(c, MessageType::kPlacementRequest, 4);
  const uint64_t id = first.body.at("placement_id").get<uint64_t>();
  for (uint64_t step = 0; step < 2; ++step)
    send(c, MessageType::kStepReport, 0,
         placement::messages::StepReport{id, step, 0.5, true, ""}.to_json());
  std::promise<std::pair<size_t, size_t>> persisted;
  service->persist_all([&](size_t jobs, size_t written) { persisted.set_value({jobs, written}); });
  // The start placement's best was offered to the store when its candidate finished: nothing is
  // new at shutdown, and what was offered is on disk by the time `done` runs.
  EXPECT_EQ(persisted.get_future().get(), (std::pair<size_t, size_t>{1, 0}));
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(store.dir))
    files += entry.is_regular_file() ? 1 : 0;
  EXPECT_GE(files, 1u);
  EXPECT_EQ(store->failed_writes(), 0u);
}

}  // namespace
}  // namespace placementd
