// Peer identity from SO_PEERCRED: a uid sees and steers only its own jobs; listing every job and
// reloading need root or the admin group. Clients run as another uid through setpriv.

#include <gtest/gtest.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "daemon_process.h"

namespace placement::testing {
namespace {

using nlohmann::json;

constexpr const char* kOtherUid = "65534";  // nobody

std::vector<std::string> as_nobody(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/setpriv", std::string("--reuid=") + kOtherUid, std::string("--regid=") + kOtherUid,
                             "--clear-groups", "--"});
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
  Child root_job({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "root-job"});
  ASSERT_TRUE(root_job.wait_for_output("ready")) << root_job.err();
  Child other_job(as_nobody({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "nobody-job"}));
  ASSERT_TRUE(other_job.wait_for_output("ready")) << other_job.err() << daemon.log();

  // nobody sees its own job only.
  const CommandResult mine = run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs"}));
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  const json jobs = json::parse(mine.out);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["name"], "nobody-job");
  EXPECT_EQ(jobs[0]["uid"].get<int>(), 65534);

  // ... cannot look at root's job, which is reported like a missing one ...
  const CommandResult peek = run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "jobs", "show", "1"}));
  EXPECT_EQ(peek.exit_code, 2);
  EXPECT_NE(peek.err.find("not_found: no job 1 visible to uid 65534"), std::string::npos) << peek.err;

  // ... and may neither list every job nor reload.
  const CommandResult all = run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "jobs", "--all"}));
  EXPECT_EQ(all.exit_code, 2);
  EXPECT_NE(all.err.find("permission_denied"), std::string::npos) << all.err;
  const CommandResult reload = run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "reload"}));
  EXPECT_EQ(reload.exit_code, 2);
  EXPECT_NE(reload.err.find("permission_denied"), std::string::npos) << reload.err;

  // root (an admin) sees both.
  const CommandResult admin = run_command({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--all"});
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
  Child root_job({hold_job_bin(), "--socket", daemon.socket, "--graph", example_graph(), "--job", "root-job"});
  ASSERT_TRUE(root_job.wait_for_output("ready"));
  const CommandResult all = run_command(as_nobody({placementctl_bin(), "--socket", daemon.socket, "--json", "jobs", "--all"}));
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(json::parse(all.out).size(), 1u);
}

}  // namespace
}  // namespace placement::testing
