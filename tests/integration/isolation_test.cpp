// Peer identity from SO_PEERCRED: a uid sees and steers only its own jobs; listing every job and
// reloading need root or the admin group. Clients run as another uid through setpriv.

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "placement/client.h"
#include "placement/protocol.h"
#include "raw_connection.h"

namespace placement::testing {
namespace {

using nlohmann::json;
using protocol::MessageType;

constexpr const char* kOtherUid = "65534";  // nobody

std::vector<std::string> as_nobody(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/setpriv", std::string("--reuid=") + kOtherUid,
                             std::string("--regid=") + kOtherUid, "--clear-groups", "--"});
  return argv;
}

class Isolation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run clients under a second uid";
    if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is missing";
  }
};

TEST_F(Isolation, EachUidSeesOnlyItsOwnJobs) {
  DaemonProcess daemon;
  daemon.start();
  Child root_job(
      {hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "root-job"});
  ASSERT_TRUE(root_job.wait_for_output("ready")) << root_job.err();
  Child other_job(as_nobody({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(),
                             "--job", "nobody-job"}));
  ASSERT_TRUE(other_job.wait_for_output("ready")) << other_job.err() << daemon.log();

  // nobody sees its own job only.
  const CommandResult mine =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs"}));
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  const json jobs = json::parse(mine.out);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["name"], "nobody-job");
  EXPECT_EQ(jobs[0]["uid"].get<int>(), 65534);

  // ... cannot look at root's job, which is reported like a missing one ...
  const CommandResult peek =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "jobs", "show", "1"}));
  EXPECT_EQ(peek.exit_code, 2);
  EXPECT_NE(peek.err.find("not_found: no job 1 visible to uid 65534"), std::string::npos)
      << peek.err;

  // ... and may neither list every job nor reload.
  const CommandResult all =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "jobs", "--all"}));
  EXPECT_EQ(all.exit_code, 2);
  EXPECT_NE(all.err.find("permission_denied"), std::string::npos) << all.err;
  const CommandResult reload =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "reload"}));
  EXPECT_EQ(reload.exit_code, 2);
  EXPECT_NE(reload.err.find("permission_denied"), std::string::npos) << reload.err;

  // root (an admin) sees both.
  const CommandResult admin =
      run_command({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--all"});
  ASSERT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_EQ(json::parse(admin.out).size(), 2u);

  root_job.signal(SIGTERM);
  other_job.signal(SIGTERM);
  EXPECT_EQ(root_job.wait(), 0);
  EXPECT_EQ(other_job.wait(), 0) << other_job.err();
}

TEST_F(Isolation, AdminGroupMembersMayListEverything) {
  // nobody's primary group becomes the configured admin group.
  struct group* g = ::getgrgid(65534);
  if (!g) GTEST_SKIP() << "no group 65534";
  DaemonProcess daemon({"admin_group = \"" + std::string(g->gr_name) + "\"\n"});
  daemon.start();
  Child root_job(
      {hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "root-job"});
  ASSERT_TRUE(root_job.wait_for_output("ready"));
  const CommandResult all = run_command(
      as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--all"}));
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(json::parse(all.out).size(), 1u);
}

TEST_F(Isolation, OneUidCannotTakeEveryConnection) {
  // nobody holds its four connections (max_connections_per_uid) with idle jobs; its fifth is
  // refused, and other users (root here) still connect.
  DaemonProcess daemon({"max_connections = 8\nmax_connections_per_uid = 4\n"});
  daemon.start();
  std::vector<std::unique_ptr<Child>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<Child>(as_nobody(
        {hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "idle"})));
    ASSERT_TRUE(held.back()->wait_for_output("ready")) << held.back()->err() << daemon.log();
  }
  const CommandResult fifth =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "status"}));
  EXPECT_NE(fifth.exit_code, 0);
  EXPECT_NE(fifth.err.find("uid 65534 has 4 connections, the configured maximum per user "
                           "(daemon.max_connections_per_uid)"),
            std::string::npos)
      << fifth.err;
  const CommandResult root = run_command({placementctl_bin(), "--socket", daemon.socket, "status"});
  EXPECT_EQ(root.exit_code, 0) << root.err;
  for (auto& child : held) child->signal(SIGTERM);
  for (auto& child : held) EXPECT_EQ(child->wait(), 0) << child->err();
  // Closed connections give their places back.
  const CommandResult again =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "status"}));
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(Isolation, AUsersSlowGroupLookupHoldsBackNoOtherConnection) {
  // Whether a uid administers is an NSS lookup, which may wait seconds on a directory server. The
  // daemon's group lookups here take 1.5 s each (tools/slow_nss.cpp); while nobody's connection
  // waits for its answer, root's requests go on as usual, and nobody's is then served.
  if (under_address_sanitizer())
    GTEST_SKIP() << "a preloaded library would come before AddressSanitizer's runtime";
  struct group* g = ::getgrgid(65534);
  if (!g) GTEST_SKIP() << "no group 65534";
  DaemonOptions options{"admin_group = \"" + std::string(g->gr_name) + "\"\n"};
  options.frame_timeout_ms = 5000;
  options.env = {std::string("LD_PRELOAD=") + SLOW_NSS_LIB, "SLOW_NSS_MS=1500"};
  DaemonProcess daemon(options);
  daemon.start();
  Client root(ClientOptions{daemon.socket, "root", 5000});
  Child nobody(
      as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--all"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its lookup has begun
  std::chrono::steady_clock::duration slowest{};
  for (int i = 0; i < 10; ++i) {
    const auto started = std::chrono::steady_clock::now();
    root.request(MessageType::kStatus, json::object(), MessageType::kStatusReply);
    slowest = std::max(slowest, std::chrono::steady_clock::now() - started);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count(), 500)
      << "root's slowest status (ms) while nobody's lookup ran";
  EXPECT_EQ(nobody.wait(), 0) << nobody.err();
  EXPECT_EQ(json::parse(nobody.out()).size(), 0u)
      << "an admin (group 65534), answered once its lookup was in";
}

TEST_F(Isolation, TheUserHoldingTheMostBufferedBytesIsShedNotAnotherUsersUpload) {
  // nobody holds three half-sent frames of 40 kB; root's upload of 60 kB then crosses the cap
  // (150 kB). Root's is the largest single frame, but nobody holds the most: one of nobody's goes.
  DaemonOptions options{"max_frame_bytes = 100000\nmax_buffered_bytes = 150000\n"};
  options.frame_timeout_ms = 10000;
  DaemonProcess daemon(options);
  daemon.start();
  Child hog(as_nobody({hold_partial_frames_bin(), "--socket", daemon.socket, "--connections", "3",
                       "--bytes", "40000"}));
  ASSERT_TRUE(hog.wait_for_output("ready")) << hog.err() << daemon.log();
  RawConnection job(daemon.socket);
  job.hello();
  const auto head = protocol::encode_header(
      {job.version(), static_cast<uint16_t>(MessageType::kGraphUpload), 70000, 7});
  std::vector<uint8_t> upload(head.begin(), head.end());
  upload.resize(upload.size() + 60000, 0x00);
  job.send(upload);
  EXPECT_FALSE(job.read_frame(300)) << "root's upload was shed";
  // The rest of it: the upload arrives whole and is answered (it has not attached, its own
  // non-fatal problem, told before any of its bytes is decoded).
  job.send(std::vector<uint8_t>(10000, 0x00));
  const auto answer = job.read_frame();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->second.value("code", ""), protocol::error::kUnexpected)
      << answer->second.dump();
  EXPECT_NE(
      daemon.log().find(
          "uid 65534: input buffers over daemon.max_buffered_bytes; its connections hold the most "
          "(120048 bytes)"),
      std::string::npos)
      << daemon.log();
  hog.signal(SIGTERM);
  EXPECT_EQ(hog.wait(), 0) << hog.err();
}

// The value after "key =" or "Key=" on the first line that sets it in a shipped file, unquoted.
std::string shipped_value(const std::string& path, const std::string& key) {
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::string rest = line.substr(key.size());
    const size_t eq = rest.find('=');
    if (eq == std::string::npos || rest.find_first_not_of(' ') != eq) continue;
    rest = rest.substr(eq + 1);
    rest.erase(0, rest.find_first_not_of(' '));
    if (rest.size() >= 2 && rest.front() == '"') rest = rest.substr(1, rest.find('"', 1) - 1);
    return rest;
  }
  ADD_FAILURE() << path << " sets no " << key;
  return "";
}

// The socket unit and config as shipped, with real uids: group 65534 stands in for the socket's
// group (`placement`, which this machine may not have), as systemd's SocketGroup would set it.
TEST_F(Isolation, TheShippedGroupsSeparateAttachingFromAdministering) {
  const std::string socket_group = shipped_value(SHIPPED_SOCKET_UNIT, "SocketGroup");
  const std::string socket_mode = shipped_value(SHIPPED_SOCKET_UNIT, "SocketMode");
  const std::string admin_group = shipped_value(SHIPPED_CONFIG_FOR_CHECK, "admin_group");
  EXPECT_EQ(socket_group, "placement");
  EXPECT_EQ(socket_mode, "0660");
  EXPECT_EQ(shipped_value(SHIPPED_CONFIG_FOR_CHECK, "socket_mode"), "0o660");
  ASSERT_NE(admin_group, socket_group) << "every user who may attach would be an admin";
  DaemonOptions options;
  options.socket_mode = "0o" + socket_mode.substr(1);
  options.daemon_keys = "admin_group = \"" + admin_group + "\"\n";
  DaemonProcess daemon(options);
  daemon.start();
  ASSERT_EQ(::chown(daemon.socket.c_str(), 0, 65534), 0);
  Child root_job(
      {hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "root-job"});
  ASSERT_TRUE(root_job.wait_for_output("ready")) << root_job.err();

  // A member of the socket's group attaches and sees its own job, but is no admin.
  Child member_job(as_nobody(
      {hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "member"}));
  ASSERT_TRUE(member_job.wait_for_output("ready")) << member_job.err() << daemon.log();
  const CommandResult mine =
      run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs"}));
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  ASSERT_EQ(json::parse(mine.out).size(), 1u);
  EXPECT_EQ(json::parse(mine.out)[0]["name"], "member");
  for (const std::vector<std::string>& admin_only :
       {std::vector<std::string>{"jobs", "--all"}, std::vector<std::string>{"jobs", "show", "1"},
        std::vector<std::string>{"reload"}}) {
    std::vector<std::string> argv = {placementctl_bin(), "--socket", daemon.socket};
    argv.insert(argv.end(), admin_only.begin(), admin_only.end());
    const CommandResult refused = run_command(as_nobody(argv));
    EXPECT_EQ(refused.exit_code, 2) << admin_only[0] << ": " << refused.out;
    EXPECT_TRUE(refused.err.find("permission_denied") != std::string::npos ||
                refused.err.find("not_found: no job 1 visible to uid 65534") != std::string::npos)
        << refused.err;
  }

  // A user outside the socket's group cannot connect at all.
  const CommandResult outsider =
      run_command({"/usr/bin/setpriv", "--reuid=65534", "--regid=65533", "--clear-groups", "--",
                   placementctl_bin(), "--socket", daemon.socket, "jobs"});
  EXPECT_NE(outsider.exit_code, 0);
  EXPECT_NE(outsider.err.find("ermission denied"), std::string::npos) << outsider.err;

  root_job.signal(SIGTERM);
  member_job.signal(SIGTERM);
  EXPECT_EQ(root_job.wait(), 0);
  EXPECT_EQ(member_job.wait(), 0) << member_job.err();
}

}  // namespace
}  // namespace placement::testing
