// Issue #18's fault suite: a real placementd, real training jobs (the GNMT example on two logical
// CPU devices, exploring with short candidates), and the faults a node sees: the daemon killed with
// SIGKILL at ten points of exploration, stopped for 30 s, its state directory full, its state files
// corrupt or truncated, a client that sends half a frame while 64 jobs report, a job killed while
// it swaps (with its parameters homed away from its ops). Each test asserts that the jobs trained
// exactly as without placementd (every step's loss equals the reference run's: faults.reference),
// that the daemon recovers or refuses cleanly, and that what it persisted is whole.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "attach_flow.h"
#include "daemon_process.h"
#include "placement/messages.h"
#include "placement/serialization.h"
#include "raw_connection.h"

namespace placement::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::MessageType;
using Clock = std::chrono::steady_clock;

// A job's steps. The reference run (ctest faults.reference, tests/faults/make_reference.sh)
// trained as many steps without placementd as this machine trains in about a minute; a job's
// losses are the first of them (the example's batches depend on the step only). The kill -9
// test's job trains them all, long enough for ten restarts of its daemon, and so does the job the
// SIGSTOP test starts during the stop, long enough to outlast it; every other job a quarter.
int reference_steps() {
  static const int steps = [] {
    const std::string reference = read_file(REFERENCE_LOSSES);
    return static_cast<int>(std::count(reference.begin(), reference.end(), '\n'));
  }();
  return steps;
}
int job_steps() { return reference_steps() / 4; }

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

// Lines where the daemon says it pushed `job` a placement.
size_t pushes_to(const std::string& log, const std::string& job) {
  size_t n = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    n += line.find("'" + job + "': placement ") != std::string::npos &&
         line.find("pushed after step") != std::string::npos;
  return n;
}

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<std::string> gnmt(const DaemonProcess& daemon, const std::string& job,
                              const std::string& losses, int steps = job_steps()) {
  return {TRAIN_GNMT_BIN, "--model",  GNMT_MODEL, "--steps", std::to_string(steps),
          "--log-every",  "10",       "--job",    job,       "--socket",
          daemon.socket,  "--losses", losses};
}

// Every step trained, each with the loss of the run without placementd.
void expect_trained_as_without_placementd(const std::string& losses, int steps = job_steps()) {
  const std::string live = read_file(losses), reference = read_file(REFERENCE_LOSSES);
  ASSERT_GE(reference_steps(), steps) << REFERENCE_LOSSES;
  size_t end = 0;
  for (int line = 0; line < steps; ++line) end = reference.find('\n', end) + 1;
  EXPECT_EQ(std::count(live.begin(), live.end(), '\n'), steps) << losses << ": steps lost";
  EXPECT_EQ(live, reference.substr(0, end))
      << losses << ": the losses differ from the run without placementd";
}

// The last "step N" the example printed.
int last_step(const std::string& out) {
  const size_t at = out.rfind("\nstep ");
  return at == std::string::npos ? 0 : std::atoi(out.c_str() + at + 6);
}

bool attached(const DaemonProcess& daemon, const std::string& job) {
  try {
    const json jobs =
        daemon.client(2000).request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    for (const json& j : jobs.at("jobs"))
      if (j.at("name") == job) return true;
  } catch (const std::exception&) {
    // Not answering yet: not attached.
  }
  return false;
}

// Every stored placement parses and names a placement and its step time, every policy state is
// non-empty, and no write was left half done.
void expect_state_whole(const std::string& state_dir) {
  for (const auto& entry : fs::recursive_directory_iterator(state_dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string path = entry.path().string();
    EXPECT_EQ(path.find(".tmp."), std::string::npos) << "an unfinished write was left: " << path;
    if (entry.path().extension() == ".json") {
      json doc;
      EXPECT_NO_THROW(doc = json::parse(read_file(path))) << path;
      EXPECT_TRUE(doc.contains("placement") && doc.value("step_time_s", 0.0) > 0)
          << path << ": " << doc.dump();
    } else if (entry.path().extension() == ".bin") {
      EXPECT_GT(fs::file_size(entry.path()), 0u) << path;
    }
  }
}

// Below `dir`, in each uid's directory.
std::vector<fs::path> files_with(const std::string& dir, const std::string& extension) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec))
    if (entry.path().extension() == extension) out.push_back(entry.path());
  return out;
}

// A job logs a line every 10 steps, each under a second even on a CI machine three times slower
// than the ~20 ms a step this suite was sized on; one that logs nothing for a minute is hung. How
// long a job takes in all depends on the machine, so no test bounds it (ctest's TIMEOUT is the
// backstop).
constexpr int kJobStallMs = 60000;

// How every test ends: the job finished and trained as without placementd, and the daemon stops
// cleanly with its state whole.
void expect_trained_and_state_whole(Child& job, const std::string& losses, DaemonProcess& daemon) {
  ASSERT_EQ(job.wait_while_writing(kJobStallMs), 0) << job.err() << job.out();
  expect_trained_as_without_placementd(losses);
  EXPECT_EQ(daemon.stop(), 0) << daemon.log();
  expect_state_whole(daemon.state_dir);
}

// Exploration that goes on for the whole run: many short candidates.
DaemonOptions exploring() {
  DaemonOptions o = fast_exploration(100000);
  o.log_level = "debug";  // the "pushed after step" lines say when a job is about to swap
  return o;
}

TEST(Faults, KillNineOfTheDaemonAtTenPointsOfExplorationLosesNoStep) {
  DaemonProcess daemon(exploring());
  daemon.start();
  const std::string losses = daemon.dir + "/gnmt.losses";
  // Long enough for ten restarts on a loaded machine (each is a start, a re-attach, a pause: about
  // 3.5 s): the reference's steps, about a minute of training.
  Child job(gnmt(daemon, "gnmt-kill", losses, reference_steps()));
  std::mt19937 rng(18);  // the same points in every run
  std::uniform_int_distribution<int> pause_ms(50, 700);
  std::string logs;
  int mid_swap = 0;
  const auto started = Clock::now();
  for (int kill = 0; kill < 10; ++kill) {
    ASSERT_TRUE(wait_until([&] { return attached(daemon, "gnmt-kill"); }, 30000))
        << "kill " << kill << ": the job did not attach\n"
        << job.out() << logs << daemon.log();
    if (kill % 3 == 1) {
      // Right after the daemon pushed a directive: the job takes it and swaps with its daemon gone.
      const size_t pushed = pushes_to(daemon.log(), "gnmt-kill");
      if (wait_until([&] { return pushes_to(daemon.log(), "gnmt-kill") > pushed; }, 20000))
        ++mid_swap;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    }
    daemon.stop(SIGKILL);
    logs += daemon.log();
    daemon.start();
  }
  EXPECT_EQ(mid_swap, 3);
  const double restarts_s = std::chrono::duration<double>(Clock::now() - started).count();
  ASSERT_EQ(job.wait_while_writing(kJobStallMs), 0) << job.err() << job.out();
  const double job_s = std::chrono::duration<double>(Clock::now() - started).count();
  // What sizes faults.reference's minute: the job must outlast the restarts on any machine.
  std::printf("ten restarts took %.1f s of the job's %.1f s (%d steps)\n", restarts_s, job_s,
              reference_steps());
  expect_trained_as_without_placementd(losses, reference_steps());
  // The last daemon had the job back and answered its detach (a kill between the daemon taking an
  // attach and the job reading the answer costs the job's count one, so no count is asserted).
  EXPECT_NE(daemon.log().find("'gnmt-kill' attached"), std::string::npos) << daemon.log();
  EXPECT_NE(job.out().find("detached: best"), std::string::npos) << job.out();
  EXPECT_EQ(daemon.stop(), 0);
  logs += daemon.log();
  EXPECT_GE(count_of(logs, "'gnmt-kill' attached"), 11u)
      << "the job attached to each of the 11 daemons";
  EXPECT_EQ(logs.find("ignoring stored placement"), std::string::npos)
      << "a persisted file was damaged\n"
      << logs;
  EXPECT_EQ(logs.find("stored policy state not used"), std::string::npos) << logs;
  EXPECT_NE(logs.find("stored best placement found"), std::string::npos)
      << "no restart resumed from the store";
  expect_state_whole(daemon.state_dir);
}

TEST(Faults, ADaemonStoppedForThirtySecondsHoldsNoJobBack) {
  DaemonProcess daemon(exploring());
  daemon.start();
  const std::string first_losses = daemon.dir + "/first.losses",
                    second_losses = daemon.dir + "/second.losses";
  Child first(gnmt(daemon, "gnmt-first", first_losses));
  ASSERT_TRUE(wait_until([&] { return attached(daemon, "gnmt-first"); }, 30000))
      << first.out() << daemon.log();
  ASSERT_TRUE(first.wait_for_output("step     20", 60000)) << first.out();
  daemon.signal(SIGSTOP);
  const auto stopped = Clock::now();
  const int step_at_stop = last_step(first.out());
  // A job that starts while the daemon is stopped trains too, and attaches once it is back: the
  // reference's steps, about a minute of training alone, take it well past the stop's last 20 s.
  std::this_thread::sleep_until(stopped + std::chrono::seconds(10));
  Child second(gnmt(daemon, "gnmt-second", second_losses, reference_steps()));
  std::this_thread::sleep_until(stopped + std::chrono::seconds(30));
  const int step_at_resume = last_step(first.out());
  daemon.signal(SIGCONT);
  EXPECT_GE(step_at_resume - step_at_stop, std::min(100, job_steps() - step_at_stop))
      << "the first job did not train on while the daemon was stopped\n"
      << first.out();
  ASSERT_EQ(first.wait_while_writing(kJobStallMs), 0) << first.err() << first.out();
  ASSERT_EQ(second.wait_while_writing(kJobStallMs), 0) << second.err() << second.out();
  expect_trained_as_without_placementd(first_losses);
  expect_trained_as_without_placementd(second_losses, reference_steps());
  EXPECT_TRUE(daemon.alive());
  EXPECT_NE(daemon.log().find("'gnmt-second' attached"), std::string::npos)
      << second.out() << daemon.log();
  const json status =
      daemon.client().request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
  EXPECT_EQ(status["jobs_total"].get<int>(), 0) << "both sessions ended";
  EXPECT_EQ(daemon.stop(), 0);
  expect_state_whole(daemon.state_dir);
}

// The state directory is a 1 MiB tmpfs that a file fills, where this process may mount one (root);
// elsewhere the daemon runs with tests/faults/enospc_preload.cpp, whose writes there fail with
// ENOSPC while a switch file exists. PLACEMENT_FAULTS_PRELOAD=1 takes the second way as root too.
class FullStateDirectory {
 public:
  explicit FullStateDirectory(DaemonProcess& daemon)
      : dir_(daemon.state_dir), switch_(daemon.dir + "/disk-full") {
    fs::create_directories(dir_);
    mounted_ = !std::getenv("PLACEMENT_FAULTS_PRELOAD") &&
               ::mount("placementd-faults", dir_.c_str(), "tmpfs", 0, "size=1m") == 0;
    if (!mounted_) {
      daemon.add_env("LD_PRELOAD=" ENOSPC_PRELOAD);
      daemon.add_env("PLACEMENT_FAULT_ENOSPC_DIR=" + dir_);
      daemon.add_env("PLACEMENT_FAULT_ENOSPC_SWITCH=" + switch_);
    }
  }
  ~FullStateDirectory() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  std::string how() const { return mounted_ ? "a full 1 MiB tmpfs" : "injected ENOSPC"; }
  void fill() {
    if (!mounted_) {
      std::ofstream(switch_) << "on";
      return;
    }
    FILE* f = std::fopen((dir_ + "/filler").c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::vector<char> block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  void free() { fs::remove(mounted_ ? dir_ + "/filler" : switch_); }

 private:
  std::string dir_, switch_;
  bool mounted_ = false;
};

TEST(Faults, AFullStateDirectoryLosesNoStepAndLeavesNoDamagedFile) {
  DaemonProcess daemon(exploring());
  FullStateDirectory disk(daemon);
  daemon.start();
  disk.fill();
  const std::string losses = daemon.dir + "/gnmt.losses";
  Child job(gnmt(daemon, "gnmt-full", losses));
  auto failed_writes = [&] {
    return daemon.client()
        .request(MessageType::kStatus, json::object(),
                 MessageType::kStatusReply)["store_failed_writes"]
        .get<uint64_t>();
  };
  ASSERT_TRUE(wait_until([&] { return failed_writes() > 0; }, 60000)) << disk.how() << "\n"
                                                                      << daemon.log();
  EXPECT_TRUE(files_with(daemon.state_dir + "/placements", ".json").empty());
  expect_state_whole(daemon.state_dir);
  // Room again: the best placement the daemon holds reaches the disk with a later offer.
  disk.free();
  ASSERT_TRUE(wait_until(
      [&] { return !files_with(daemon.state_dir + "/placements", ".json").empty(); }, 60000))
      << disk.how() << "\n"
      << daemon.log();
  expect_trained_and_state_whole(job, losses, daemon);
  EXPECT_NE(daemon.log().find("No space left on device"), std::string::npos) << daemon.log();
}

// Damage what the daemon persisted, two ways in turn, and restart it: each damaged file is reported
// by name, ignored, and replaced by a whole one; the job trains on throughout.
TEST(Faults, CorruptAndTruncatedStateFilesAreReportedIgnoredAndReplaced) {
  DaemonProcess daemon(exploring());
  daemon.start();
  const std::string losses = daemon.dir + "/gnmt.losses";
  Child job(gnmt(daemon, "gnmt-damaged", losses));
  const std::string placements = daemon.state_dir + "/placements",
                    policies = daemon.state_dir + "/policies";
  std::string logs;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(wait_until([&] { return !files_with(placements, ".json").empty(); }, 60000))
        << daemon.log();
    // SIGTERM persists every session's policy state as well.
    ASSERT_EQ(daemon.stop(), 0) << daemon.log();
    logs += daemon.log();
    const auto placement_files = files_with(placements, ".json"),
               policy_files = files_with(policies, ".bin");
    ASSERT_EQ(placement_files.size(), 1u);
    ASSERT_EQ(policy_files.size(), 1u) << logs;
    const std::string stored = read_file(placement_files[0].string()),
                      policy = read_file(policy_files[0].string());
    if (round == 0) {
      std::ofstream(placement_files[0], std::ios::trunc) << stored.substr(0, stored.size() / 2);
      std::ofstream(policy_files[0], std::ios::trunc | std::ios::binary)
          << "not a policy state \x01\x02\xff";
    } else {
      std::ofstream(placement_files[0], std::ios::trunc);  // empty
      std::ofstream(policy_files[0], std::ios::trunc | std::ios::binary)
          << policy.substr(0, policy.size() / 2);
    }
    daemon.start();
    ASSERT_TRUE(wait_until(
        [&] { return count_of(daemon.log(), "stored policy state not used") > 0; }, 30000))
        << "round " << round << "\n"
        << job.out() << daemon.log();
    EXPECT_NE(daemon.log().find("ignoring stored placement " + placement_files[0].string()),
              std::string::npos)
        << daemon.log();
  }
  expect_trained_and_state_whole(job, losses, daemon);
  logs += daemon.log();
  EXPECT_EQ(count_of(logs, "ignoring stored placement"), 2u) << logs;
  EXPECT_EQ(files_with(placements, ".json").size(), 1u);
}

// One lightweight job of the 64: attach, its first placement, then reports 5 ms apart, taking the
// daemon's pushes, until it sent `steps` and got a push (64 sessions are built on two cores: the
// first candidates take seconds). `*sent`: the reports sent (all of them out of the client's
// queue), negative when no push came; set before `finished` counts the job, which then stays
// attached until `release`.
void report_steps(const DaemonProcess& daemon, int index, int steps,
                  const std::atomic<bool>& release, std::atomic<int>* finished, int* sent) {
  const OpGraph graph = load_graph_file(example_graph());
  const DeviceSet devices = DeviceSet::uniform(
      {{DeviceKind::kCpu, 0, 1ull << 32, 1.0}, {DeviceKind::kCpu, 1, 1ull << 32, 1.0}}, 1e10, 1e-5);
  Client c = daemon.client(60000);
  uint64_t id =
      attach_and_place(c, "reporter-" + std::to_string(index), graph, devices).placement_id;
  int step = 0, pushes = 0;
  auto take_pushes = [&] {
    while (c.poll_readable(0)) {
      protocol::Header header;
      const json body = c.read_frame(&header);
      if (header.type != static_cast<uint16_t>(MessageType::kPlacementDirective)) continue;
      id = body.at("placement_id").get<uint64_t>();
      ++pushes;
    }
  };
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  for (; step < steps || (pushes == 0 && Clock::now() < give_up); ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!c.send_oneway(MessageType::kStepReport,
                       messages::StepReport{id, static_cast<uint64_t>(step),
                                            0.005 + 0.0001 * (id % 5), true, ""}
                           .to_json()))
      throw std::runtime_error(
          "report " + std::to_string(step) +
          " dropped: over 1 MiB of reports waited for the daemon to read them");
    take_pushes();
  }
  // What the socket did not take waits in the client (the daemon reads a connection no faster
  // than its session takes its reports): a job's next call sends it; this one has none, so it
  // sends it now, or its last reports would never reach the daemon.
  // Within the test's 120 s for every reporter: up to 60 s for a push, then this.
  const auto flushed_by = Clock::now() + std::chrono::seconds(30);
  while (c.pending_bytes() > 0) {
    if (Clock::now() > flushed_by)
      throw std::runtime_error(std::to_string(c.pending_bytes()) +
                               " bytes of reports still unread by the daemon after 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    take_pushes();
  }
  *sent = pushes > 0 ? step : -step;
  ++*finished;
  while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  c.request(MessageType::kDetach, json::object(), MessageType::kDetached);
}

TEST(Faults, AHalfFrameThatStallsHoldsBackNoneOfSixtyFourReportingJobs) {
  DaemonProcess daemon(exploring());  // frame_timeout_ms 500
  daemon.start();
  const std::string losses = daemon.dir + "/gnmt.losses";
  Child job(gnmt(daemon, "gnmt-beside", losses));
  ASSERT_TRUE(wait_until([&] { return attached(daemon, "gnmt-beside"); }, 30000))
      << job.out() << daemon.log();

  constexpr int kJobs = 64, kReports = 100;
  std::atomic<bool> release{false};
  std::atomic<int> finished{0};
  // Reports each job sent, negative when it got no push.
  std::vector<int> sent(kJobs, 0);
  std::vector<std::thread> jobs;
  for (int j = 0; j < kJobs; ++j)
    jobs.emplace_back([&, j] {
      try {
        report_steps(daemon, j, kReports, release, &finished, &sent[static_cast<size_t>(j)]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "reporter " << j << ": " << e.what();
        ++finished;
      }
    });
  // Half a frame, then nothing, while they report.
  RawConnection stalled(daemon.socket);
  stalled.hello();
  const auto frame = protocol::encode_frame(MessageType::kStatus, 9,
                                            {{"pad", std::string(2000, 'x')}}, stalled.version());
  stalled.send(
      std::vector<uint8_t>(frame.begin(), frame.begin() + static_cast<long>(frame.size() / 2)));
  const auto error = stalled.read_frame(10000);
  ASSERT_TRUE(error.has_value()) << "the stalled client was never answered";
  EXPECT_EQ(error->second.value("code", ""), protocol::error::kTimeout) << error->second.dump();
  EXPECT_TRUE(stalled.closed_by_peer());

  ASSERT_TRUE(wait_until([&] { return finished.load() == kJobs; }, 120000));
  // Every report of every job reached its session (reports are one-way: counted a moment later).
  auto steps_counted = [&] {
    std::vector<int> counted(kJobs, 0);
    const json listed =
        daemon.client().request(MessageType::kListJobs, json::object(), MessageType::kJobList);
    for (const json& j : listed.at("jobs")) {
      const std::string name = j.at("name");
      if (name.rfind("reporter-", 0) == 0)
        counted[std::stoul(name.substr(9))] = j.at("steps").get<int>();
    }
    return counted;
  };
  // `sent` is written before `finished` counts the job, and read after all were counted.
  std::vector<int> expected(kJobs);
  std::transform(sent.begin(), sent.end(), expected.begin(), [](int n) { return std::abs(n); });
  EXPECT_TRUE(wait_until([&] { return steps_counted() == expected; }, 20000))
      << "reports lost: " << [&] {
           std::string text;
           const std::vector<int> counted = steps_counted();
           for (int j = 0; j < kJobs; ++j)
             if (counted[static_cast<size_t>(j)] != expected[static_cast<size_t>(j)])
               text += " reporter-" + std::to_string(j) + " " +
                       std::to_string(counted[static_cast<size_t>(j)]) + " of " +
                       std::to_string(expected[static_cast<size_t>(j)]) + ";";
           return text;
         }();
  release = true;
  for (auto& t : jobs) t.join();
  for (int j = 0; j < kJobs; ++j)
    EXPECT_GT(sent[static_cast<size_t>(j)], 0) << "reporter " << j << " got no push";
  expect_trained_and_state_whole(job, losses, daemon);
}

// Both jobs keep their parameters on cpu:1 (residence): the victim dies swapping between
// residence plans (its proxies follow the ops placementd moves), the other swaps between them all
// along, with its parameters streamed to cpu:0 for each use, and trains bit for bit as the
// reference run, which had neither placementd nor residence.
TEST(Faults, AJobKilledMidSwapLeavesTheOtherJobsAndTheStoreWhole) {
  DaemonProcess daemon(exploring());
  daemon.start();
  const std::string losses = daemon.dir + "/other.losses";
  std::vector<std::string> other_command = gnmt(daemon, "gnmt-other", losses);
  other_command.insert(other_command.end(), {"--home-parameters", "cpu:1:stream"});
  std::vector<std::string> victim_command =
      gnmt(daemon, "gnmt-victim", daemon.dir + "/victim.losses");
  victim_command.insert(victim_command.end(), {"--home-parameters", "cpu:1"});
  Child other(other_command);
  Child victim(victim_command);
  ASSERT_TRUE(wait_until(
      [&] { return attached(daemon, "gnmt-victim") && attached(daemon, "gnmt-other"); }, 30000))
      << victim.out() << other.out() << daemon.log();
  // Killed right after the daemon pushed it a placement: the job dies taking it or swapping to it.
  const size_t before = pushes_to(daemon.log(), "gnmt-victim");
  ASSERT_TRUE(wait_until([&] { return pushes_to(daemon.log(), "gnmt-victim") > before; }, 30000))
      << daemon.log();
  victim.signal(SIGKILL);
  EXPECT_EQ(victim.wait(), 128 + SIGKILL);
  EXPECT_TRUE(wait_until([&] { return !attached(daemon, "gnmt-victim"); }, 10000)) << daemon.log();
  EXPECT_NE(daemon.log().find("disconnected without detach"), std::string::npos) << daemon.log();
  expect_trained_and_state_whole(other, losses, daemon);
}

}  // namespace
}  // namespace placement::testing
