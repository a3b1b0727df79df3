// The Prometheus endpoint and the journald fields of a real placementd, scraped and read while a
// job runs.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "attach_flow.h"
#include "daemon_process.h"
#include "http_get.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placement::testing {
namespace {

using nlohmann::json;
using protocol::MessageType;

// Attaches `name`, uploads the example graph, takes the start placement and reports `steps`
// steps of `seconds` under it; returns once the daemon has counted them.
void run_start(Client& c, const std::string& name, int steps, double seconds) {
  const uint64_t id =
      attach_and_place(c, name, load_graph_file(example_graph()), devices(2)).placement_id;
  for (int i = 0; i < steps; ++i)
    ASSERT_TRUE(c.send_oneway(
        MessageType::kStepReport,
        messages::StepReport{id, static_cast<uint64_t>(i), seconds, true, ""}.to_json()));
  // Runs behind the reports on the job's strand.
  c.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
}

void expect_line(const std::string& text, const std::string& line) {
  EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << " is not in:\n" << text;
}

// The value of `series` (its name and labels, as the text shows them); NaN when it is missing.
double value_of(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) {
    ADD_FAILURE() << series << " is not in:\n" << text;
    return std::nan("");
  }
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(Metrics, AScrapeDuringALiveRunShowsTheJobAndItsIntervals) {
  DaemonProcess daemon;
  const std::string address = daemon.dir + "/metrics.sock";
  daemon.write_config(daemon.base_config() + "[metrics]\nlisten = \"" + address + "\"\n");
  daemon.start();
  Client c = daemon.client();
  // One report short of a candidate's 15 steps: the start is measured (9 steps after the 5 of
  // warm-up), the job still profiling it.
  run_start(c, "resnet", 14, 0.02);
  const std::string text = scrape(address);
  const std::string job = "job_id=\"1\",job_name=\"resnet\"";
  expect_line(text, "placementd_jobs 1");
  expect_line(text, "placementd_step_reports_total 14");
  expect_line(text, "placementd_job_state{" + job + ",state=\"profiling\"} 1");
  expect_line(text, "placementd_job_state{" + job + ",state=\"exploring\"} 0");
  expect_line(text, "placementd_job_step_time_seconds{" + job + ",placement=\"start\"} 0.02");
  expect_line(text, "placementd_job_step_time_low_seconds{" + job + ",placement=\"start\"} 0.02");
  expect_line(text, "placementd_job_step_time_high_seconds{" + job + ",placement=\"best\"} 0.02");
  expect_line(text, "placementd_job_candidates{" + job + "} 1");
  expect_line(text, "placementd_job_exploration_overhead_ratio{" + job + "} 0");
  // Every step at the start's 20 ms: the job got exactly what it would have without placementd.
  EXPECT_NEAR(value_of(text, "placementd_job_realized_speedup_ratio{" + job + "}"), 1.0, 1e-12);
  EXPECT_NEAR(value_of(text, "placementd_job_beyond_best_seconds{" + job + "}"), 0.0, 1e-12);
  expect_line(text, "placementd_policy_seconds_count{request=\"step_report\"} 14");
  EXPECT_NE(text.find("placementd_job_info{" + job + ",uid=\"" + std::to_string(::getuid()) + "\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("replica_rank="), std::string::npos)
      << "a job of one process is no replica:\n"
      << text;

  // A follower of a replica group: its info series carries its rank and group.
  Client follower = daemon.client();
  follower.request(
      MessageType::kAttach,
      {{"job", "resnet"},
       {"devices", to_json(devices(2))},
       {"replica", {{"rank", 1}, {"world_size", 4}, {"group", "10.0.0.1:29500/00c0ffee"}}}},
      MessageType::kAttached);
  const std::string with_follower = scrape(address);
  expect_line(with_follower,
              "placementd_job_state{job_id=\"2\",job_name=\"resnet\",state=\"following\"} 1");
  EXPECT_NE(with_follower.find(",replica_rank=\"1\",replica_world_size=\"4\",replica_group=\"10.0."
                               "0.1:29500/00c0ffee\"} 1\n"),
            std::string::npos)
      << with_follower;
  follower.request(MessageType::kDetach, json::object(), MessageType::kDetached);

  EXPECT_EQ(http_request(address, "/").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http_request(address, "/metrics", "POST").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(http_request(address, "/metrics?x=1").rfind("HTTP/1.1 200", 0), 0u);

  c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
  expect_line(scrape(address), "placementd_jobs 0");
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
  EXPECT_FALSE(std::filesystem::exists(address)) << "the metrics socket outlived the daemon";
}

TEST(Metrics, ATcpAddressInUseFailsTheStartAndSaysWhich) {
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  DaemonProcess first;
  first.write_config(first.base_config() + "[metrics]\nlisten = \"" + address + "\"\n");
  first.start();
  expect_line(scrape(address), "placementd_jobs 0");
  EXPECT_NE(first.log().find("metrics on http://" + address + "/metrics"), std::string::npos)
      << first.log();

  DaemonProcess second;
  second.write_config(second.base_config() + "[metrics]\nlisten = \"" + address + "\"\n");
  try {
    second.start();
    FAIL() << "a second daemon started on a metrics address in use";
  } catch (const std::exception& e) {
    EXPECT_NE(
        second.log().find("metrics.listen " + address + ": cannot listen: Address already in use"),
        std::string::npos)
        << second.log();
  }
  EXPECT_FALSE(std::filesystem::exists(second.socket))
      << "the job socket was opened before the metrics one failed";
}

// sd_journal_send writes to /run/systemd/journal/socket. Where no journald runs (CI containers),
// the test stands in for it there, as root, and reads what the daemon sent.
class FakeJournal {
 public:
  static constexpr const char* kSocket = "/run/systemd/journal/socket";
  FakeJournal() {
    namespace fs = std::filesystem;
    for (const fs::path& d : {fs::path("/run/systemd"), fs::path("/run/systemd/journal")})
      if (!fs::exists(d)) {
        fs::create_directory(d);
        created_.insert(created_.begin(), d);
      }
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, kSocket, sizeof(sa.sun_path) - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  }
  ~FakeJournal() {
    ::close(fd_);
    if (bound_) ::unlink(kSocket);
    for (const auto& d : created_) std::filesystem::remove(d);
  }
  bool bound() const { return bound_; }
  // Every entry received so far, as its raw native-protocol text.
  std::vector<std::string> entries() {
    std::vector<std::string> out;
    char buffer[65536];
    for (ssize_t n; (n = ::recv(fd_, buffer, sizeof(buffer), 0)) > 0;)
      out.emplace_back(buffer, static_cast<size_t>(n));
    return out;
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
  std::vector<std::filesystem::path> created_;
};

TEST(Journal, AJobsLinesCarryJobIdAndJobNameFields) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to stand in for journald at " << FakeJournal::kSocket;
  if (std::filesystem::exists(FakeJournal::kSocket))
    GTEST_SKIP() << "a journald runs here; the test does not replace it";
  FakeJournal journal;
  ASSERT_TRUE(journal.bound());
  DaemonProcess daemon;
  // What systemd sets when stderr is the journal: the device and inode of that stream.
  std::ofstream(daemon.log_path).flush();
  struct stat st {};
  ASSERT_EQ(::stat(daemon.log_path.c_str(), &st), 0);
  daemon.add_env("JOURNAL_STREAM=" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
  daemon.start();
  {
    Client c = daemon.client();
    run_start(c, "journal-job", 3, 0.01);
    c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
  }
  EXPECT_EQ(daemon.stop(), 0);
  bool attached = false, ready = false;
  for (const std::string& e : journal.entries()) {
    if (e.find("MESSAGE=job 1 'journal-job' attached") != std::string::npos) {
      attached = true;
      EXPECT_NE(e.find("\nJOB_ID=1\n"), std::string::npos) << e;
      EXPECT_NE(e.find("\nJOB_NAME=journal-job\n"), std::string::npos) << e;
      EXPECT_NE(e.find("\nPRIORITY=6\n"), std::string::npos) << e;
    }
    if (e.find("MESSAGE=placementd ") != std::string::npos &&
        e.find(" ready on ") != std::string::npos) {
      ready = true;
      EXPECT_EQ(e.find("JOB_ID="), std::string::npos) << "a daemon line is no job's: " << e;
    }
  }
  EXPECT_TRUE(attached) << "no entry for the job's attach line reached the journal";
  EXPECT_TRUE(ready);
  EXPECT_EQ(daemon.log().find("attached"), std::string::npos) << "lines went to stderr as well:\n"
                                                              << daemon.log();
}

}  // namespace
}  // namespace placement::testing
