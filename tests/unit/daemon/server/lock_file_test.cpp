// The locks on the socket path and the state directory: held once, and never a file someone else
// planted at their path (a root daemon with its socket in a directory another user can write).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "daemon_process.h"
#include "server/lock_file.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;

std::string contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::string& path) {
  try {
    LockFile lock(path, "taken");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(LockFile, IsHeldOnceAndNamesItsHolder) {
  const std::string dir = placement::testing::make_temp_dir();
  {
    const auto first = LockFile::for_state_dir(dir);
    EXPECT_EQ(contents(dir + "/placementd.lock"), std::to_string(::getpid()) + "\n");
    try {
      LockFile::for_state_dir(dir);
      FAIL() << "locked twice";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "another placementd uses the state directory " + dir +
                                           " (pid " + std::to_string(::getpid()) + ", lock " + dir +
                                           "/placementd.lock)");
    }
  }
  EXPECT_FALSE(fs::exists(dir + "/placementd.lock")) << "released and removed";
  EXPECT_NO_THROW(LockFile::for_state_dir(dir));
  fs::remove_all(dir);
}

TEST(LockFile, ASymbolicLinkAtItsPathIsRefusedAndItsTargetKept) {
  const std::string dir = placement::testing::make_temp_dir();
  std::ofstream(dir + "/precious") << "root's data";
  fs::create_symlink(dir + "/precious", dir + "/pd.sock.lock");
  const std::string e = error_of(dir + "/pd.sock.lock");
  EXPECT_NE(e.find("lock file " + dir + "/pd.sock.lock: it is a symbolic link; refusing to use it"),
            std::string::npos)
      << e;
  EXPECT_EQ(contents(dir + "/precious"), "root's data");
  fs::remove_all(dir);
}

TEST(LockFile, AHardLinkAtItsPathIsRefusedAndItsTargetKept) {
  const std::string dir = placement::testing::make_temp_dir();
  std::ofstream(dir + "/precious") << "root's data";
  fs::create_hard_link(dir + "/precious", dir + "/pd.sock.lock");
  const std::string e = error_of(dir + "/pd.sock.lock");
  EXPECT_NE(e.find("it has 2 hard links; refusing to use it"), std::string::npos) << e;
  EXPECT_EQ(contents(dir + "/precious"), "root's data");
  fs::remove_all(dir);
}

TEST(LockFile, AFileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  const std::string dir = placement::testing::make_temp_dir();
  std::ofstream(dir + "/pd.sock.lock") << "planted";
  ASSERT_EQ(::chown((dir + "/pd.sock.lock").c_str(), 65534, 65534), 0);
  const std::string e = error_of(dir + "/pd.sock.lock");
  EXPECT_NE(e.find("it belongs to uid 65534, not to this daemon's 0"), std::string::npos) << e;
  EXPECT_EQ(contents(dir + "/pd.sock.lock"), "planted");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placementd
