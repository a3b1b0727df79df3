// Data-parallel replicas (issue #20): the GNMT example started N times with torchrun's environment,
// Gloo on 127.0.0.1, against a real placementd that explores. One placement holds for the group:
// every rank runs the same placement at every step, and the parameters agree bit for bit.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "http_get.h"

namespace placement {
namespace {

using nlohmann::json;
using testing::Child;
using testing::DaemonProcess;
using testing::free_port;
using testing::read_file;
using testing::run_command;

struct Replicas {
  std::vector<std::unique_ptr<Child>> ranks;
  std::vector<std::string> placements;  // each rank's --placements file
};

// `more_args(rank)`: that rank's further arguments.
Replicas start(int world, const std::string& socket, const std::string& dir, int steps,
               int timeout_ms = 60000,
               const std::function<std::vector<std::string>(int)>& more_args = nullptr) {
  Replicas r;
  const int port = free_port();
  for (int rank = 0; rank < world; ++rank) {
    r.placements.push_back(dir + "/placements." + std::to_string(rank));
    std::vector<std::string> args{TRAIN_GNMT_BIN,
                                  "--model",
                                  std::string(MODEL_DIR) + "/gnmt_example.pt",
                                  "--steps",
                                  std::to_string(steps),
                                  "--log-every",
                                  "10",
                                  "--socket",
                                  socket,
                                  "--placements",
                                  r.placements.back(),
                                  "--replica-timeout-ms",
                                  std::to_string(timeout_ms)};
    if (more_args)
      for (std::string& a : more_args(rank)) args.push_back(std::move(a));
    r.ranks.push_back(std::make_unique<Child>(
        std::move(args), std::vector<std::string>{
                             "RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world),
                             "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=127.0.0.1",
                             "MASTER_PORT=" + std::to_string(port), "OMP_NUM_THREADS=1"}));
  }
  return r;
}

std::string digest(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("parameters digest: ([0-9a-f]{16})")) ? m[1].str()
                                                                                    : std::string();
}

void expect_one_group(int world) {
  DaemonProcess daemon(testing::fast_exploration(12, 0.5));
  daemon.start();
  Replicas r = start(world, daemon.socket, daemon.dir, 60);
  std::vector<std::string> digests;
  for (int rank = 0; rank < world; ++rank) {
    Child& c = *r.ranks[rank];
    ASSERT_EQ(c.wait(180000), 0) << "rank " << rank << ":\n" << c.err() << c.out();
    EXPECT_NE(
        c.out().find("replica: rank " + std::to_string(rank) + " of " + std::to_string(world)),
        std::string::npos)
        << c.out();
    digests.push_back(digest(c.out()));
    ASSERT_FALSE(digests.back().empty()) << c.out();
    // Logical CPU devices are all "cpu" to c10d: one route, Gloo.
    EXPECT_TRUE(std::regex_search(c.out(), std::regex("\ngradients on cpu +gloo\n"))) << c.out();
  }
  EXPECT_EQ(std::set<std::string>(digests.begin(), digests.end()).size(), 1u)
      << "the replicas' parameters differ";
  const std::string leader = read_file(r.placements[0]);
  std::set<std::string> ids;
  for (size_t at = 0, next; at < leader.size(); at = next + 1) {
    next = leader.find('\n', at);
    ids.insert(leader.substr(at, next - at));
  }
  EXPECT_GE(ids.size(), 2u) << "placementd swapped placements in the group:\n"
                            << leader << daemon.log();
  for (int rank = 1; rank < world; ++rank)
    EXPECT_EQ(read_file(r.placements[rank]), leader)
        << "rank " << rank << " ran other placements than rank 0";
  // Every rank attached (here all to one daemon, as on one node): rank 0 as the job placementd
  // places, the others as its followers, every one in the same group, each with all its steps.
  const testing::CommandResult ctl = run_command(
      {testing::placementctl_bin(), "jobs", "--finished", "--json", "--socket", daemon.socket});
  ASSERT_EQ(ctl.exit_code, 0) << ctl.err;
  const json jobs = json::parse(ctl.out);
  ASSERT_EQ(jobs.size(), static_cast<size_t>(world)) << jobs.dump(2);
  std::set<int64_t> ranks;
  std::set<std::string> groups;
  for (const json& j : jobs) {
    ASSERT_TRUE(j["replica"].is_object()) << j.dump(2);
    const int64_t rank = j["replica"]["rank"];
    ranks.insert(rank);
    groups.insert(j["replica"]["group"].get<std::string>());
    EXPECT_EQ(j["replica"]["world_size"], world);
    if (rank == 0) {
      EXPECT_GE(j["candidates_tried"].get<int>(), 2) << j.dump(2);
    } else {
      EXPECT_EQ(j["candidates_tried"], 0) << j.dump(2);
      EXPECT_EQ(j["steps"], 60) << "a follower reports every step: " << j.dump(2);
      EXPECT_TRUE(j["current_step_time_s"].is_number()) << j.dump(2);
    }
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(world));
  ASSERT_EQ(groups.size(), 1u) << jobs.dump(2);
  EXPECT_EQ(groups.begin()->rfind("127.0.0.1:", 0), 0u) << *groups.begin();
  EXPECT_NE(daemon.log().find("rank 0 of " + std::to_string(world) + " in replica group " +
                              *groups.begin() + ": it places the group"),
            std::string::npos)
      << daemon.log();
  for (int rank = 1; rank < world; ++rank)
    EXPECT_NE(daemon.log().find("attached as rank " + std::to_string(rank) + " of " +
                                std::to_string(world) + " in replica group " + *groups.begin()),
              std::string::npos)
        << daemon.log();
}

TEST(Replicas, TwoRanksRunTheSamePlacementsAtTheSameStepsAndEndBitwiseEqual) {
  expect_one_group(2);
}

TEST(Replicas, FourRanksRunTheSamePlacementsAtTheSameStepsAndEndBitwiseEqual) {
  expect_one_group(4);
}

// Rank 1 started with `rank_one_args` beside a rank 0 with the example's defaults: both end with
// status 1 at once, each with an error holding "rank R" + `said`, and `why`.
void expect_both_refuse(const std::vector<std::string>& rank_one_args, const std::string& said,
                        const std::string& why) {
  DaemonProcess daemon;
  daemon.start();
  Replicas r = start(2, daemon.socket, daemon.dir, 20, 60000, [&](int rank) {
    return rank == 1 ? rank_one_args : std::vector<std::string>{};
  });
  for (int rank = 0; rank < 2; ++rank) {
    Child& c = *r.ranks[rank];
    EXPECT_EQ(c.wait(60000), 1) << "rank " << rank << ":\n" << c.err() << c.out();
    EXPECT_NE(c.err().find("replica group: rank " + std::to_string(rank) + said), std::string::npos)
        << c.err();
    EXPECT_NE(c.err().find(why), std::string::npos) << c.err();
  }
}

// Rank 0's placements name devices by position: a rank with other devices would run ops where
// rank 0 never put them.
TEST(Replicas, RanksWithOtherDevicesRefuseToStartAndSayWhy) {
  expect_both_refuse({"--devices", "cpu:0,cpu:1,cpu:2"}, " has the devices cpu:0, cpu:1",
                     "every rank lists as many devices");
}

// Parameters start where the start placement puts them and are paired by their device: ranks that
// start elsewhere would wait in different collectives until the timeout.
TEST(Replicas, RanksStartingFromOtherPlacementsRefuseToStartAndSayWhy) {
  expect_both_refuse({"--start", "interleaved"}, " starts from another placement than another rank",
                     "every rank starts from the same one");
}

// Sends `signo` to rank `victim` of two mid-training (SIGKILL: it dies; SIGSTOP: it hangs); the
// other must end, with status 1, inside its timeout (`timeout_ms`) and the roll call (5 s at most),
// with an error containing `named`.
void stop_one_of_two(int victim, int signo, int timeout_ms, const std::string& named) {
  DaemonProcess daemon(testing::fast_exploration(1000, 0.5));
  daemon.start();
  Replicas r = start(2, daemon.socket, daemon.dir, 100000, timeout_ms);
  Child& dying = *r.ranks[victim];
  Child& other = *r.ranks[1 - victim];
  ASSERT_TRUE(dying.wait_for_output("step     10", 120000)) << dying.err() << dying.out();
  dying.signal(signo);
  const auto killed = std::chrono::steady_clock::now();
  const int status = other.wait(timeout_ms + 15000);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(status, 1) << other.err() << other.out();
  EXPECT_LT(waited, timeout_ms / 1000.0 + 10.0) << "the surviving rank outlived its timeout";
  EXPECT_NE(other.err().find("replica group: "), std::string::npos) << other.err();
  EXPECT_NE(other.err().find(named), std::string::npos) << "the error names the rank that died\n"
                                                        << other.err();
}

// While the group trains, `placementctl jobs` shows rank 0 exploring and rank 1 following, both
// in one group; `jobs show` of the follower says whose placement it runs.
TEST(Replicas, PlacementctlShowsEveryRankWithItsRankAndGroup) {
  DaemonProcess daemon(testing::fast_exploration(1000, 0.5));
  daemon.start();
  Replicas r = start(2, daemon.socket, daemon.dir, 100000);
  ASSERT_TRUE(r.ranks[1]->wait_for_output("step     20", 120000))
      << r.ranks[1]->err() << r.ranks[1]->out();
  const testing::CommandResult list =
      run_command({testing::placementctl_bin(), "jobs", "--socket", daemon.socket});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::smatch leader, follower;
  ASSERT_TRUE(std::regex_search(
      list.out, leader,
      std::regex("\\n *(\\d+) +gnmt-example .* 0/2 (127\\.0\\.0\\.1:\\d+/[0-9a-f]{8})")))
      << list.out;
  ASSERT_TRUE(std::regex_search(
      list.out, follower,
      std::regex(
          "\\n *(\\d+) +gnmt-example .*following .* 1/2 (127\\.0\\.0\\.1:\\d+/[0-9a-f]{8})")))
      << list.out;
  EXPECT_EQ(leader[2], follower[2]) << "one group:\n" << list.out;
  // The follower's "-" under CANDIDATES ends where the column's numbers do.
  const size_t header_end = list.out.find("CANDIDATES") + std::string("CANDIDATES").size();
  const size_t line_at =
      static_cast<size_t>(follower.position(0)) + 1;  // the match starts at its '\n'
  const std::string line = list.out.substr(line_at, list.out.find('\n', line_at) - line_at);
  ASSERT_GE(line.size(), header_end) << list.out;
  EXPECT_EQ(line.substr(header_end - 2, 2), " -") << "CANDIDATES is not right-aligned:\n"
                                                  << list.out;
  const testing::CommandResult show = run_command(
      {testing::placementctl_bin(), "jobs", "show", follower[1].str(), "--socket", daemon.socket});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("rank 1 of 2 in group " + follower[2].str() +
                          ": runs the placement rank 0's daemon decides"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("(median of the latest 64)"), std::string::npos) << show.out;
  for (auto& rank : r.ranks) rank->signal(SIGKILL);
}

TEST(Replicas, ARankThatDiesEndsTheOthersWithAnErrorThatNamesIt) {
  stop_one_of_two(1, SIGKILL, 20000, "failed on rank 0 of 2: rank 1 ended or did not answer");
}

TEST(Replicas, RankZeroDyingEndsTheOthersWithAnErrorThatNamesIt) {
  stop_one_of_two(0, SIGKILL, 20000,
                  "failed on rank 1 of 2: rank 0, which serves the group's store at 127.0.0.1:");
}

TEST(Replicas, ARankThatHangsEndsTheOthersAfterTheTimeoutWithAnErrorThatNamesIt) {
  stop_one_of_two(1, SIGSTOP, 3000,
                  "failed on rank 0 of 2: rank 1 ended or did not answer within 3000 ms");
}

}  // namespace
}  // namespace placement
