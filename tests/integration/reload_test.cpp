// SIGHUP and `placementctl reload`: a valid new config takes effect, a broken one is refused with
// its errors and the old one stays; a plugin directory with broken libraries never stops the
// daemon.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "placement/serialization.h"

namespace placement::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::MessageType;

int64_t max_candidates_for_new_job(const DaemonProcess& daemon) {
  Client c = daemon.client();
  const DeviceSet d = DeviceSet::uniform({{DeviceKind::kCpu, 0, 1ull << 30, 1.0}}, 1e9, 0);
  const json attached = c.request(MessageType::kAttach, {{"job", "probe"}, {"devices", to_json(d)}},
                                  MessageType::kAttached);
  return attached["max_candidates"].get<int64_t>();
}

bool wait_for_log(const DaemonProcess& daemon, const std::string& text) {
  for (int i = 0; i < 300; ++i) {
    if (daemon.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Reload, SighupAppliesAValidConfigAndRefusesABrokenOne) {
  // Its configs keep the default policy, whose placer needs LibTorch.
  if (!learned_plugins_built()) GTEST_SKIP() << "built without LibTorch";
  DaemonProcess daemon;
  daemon.start();
  EXPECT_EQ(max_candidates_for_new_job(daemon), 100);

  daemon.write_config(daemon.base_config() + "[exploration]\nmax_candidates = 42\n");
  daemon.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(daemon, "reloaded " + daemon.config_path)) << daemon.log();
  EXPECT_EQ(max_candidates_for_new_job(daemon), 42);

  daemon.write_config(daemon.base_config() +
                      "[exploration]\nmax_candidates = \"lots\"\n[policy]\nplacer = \"oracle\"\n");
  daemon.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(daemon, "reload refused")) << daemon.log();
  EXPECT_NE(daemon.log().find(daemon.config_path + ":"), std::string::npos);
  EXPECT_NE(daemon.log().find("exploration.max_candidates must be an integer"), std::string::npos)
      << daemon.log();
  EXPECT_TRUE(daemon.alive());
  EXPECT_EQ(max_candidates_for_new_job(daemon), 42) << "the old config stays in force";

  // The same through the socket command: the errors come back to the admin.
  const CommandResult r = run_command({placementctl_bin(), "--socket", daemon.socket, "reload"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("invalid_config"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no placer plugin named 'oracle'"), std::string::npos) << r.err;

  daemon.write_config(daemon.base_config());
  const CommandResult ok = run_command({placementctl_bin(), "--socket", daemon.socket, "reload"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(max_candidates_for_new_job(daemon), 100);
  EXPECT_EQ(daemon.stop(), 0);
}

bool offers_placer(const DaemonProcess& daemon, const std::string& name) {
  const json plugins =
      daemon.client().request(MessageType::kListPlugins, json::object(), MessageType::kPluginList);
  for (const json& p : plugins["plugins"])
    if (p["kind"] == "placer" && p["name"] == name) return true;
  return false;
}

TEST(Reload, ARefusedConfigChangesNoPlugins) {
  DaemonProcess daemon;
  daemon.start();
  ASSERT_FALSE(offers_placer(daemon, "slow"));
  // A config that adds the test plugins' directory but is refused for another key: the daemon
  // goes on offering what it offered, not the refused file's plugins.
  const std::string with_test_plugins =
      "[plugins]\ndirs = [\"" + plugin_dir() + "\", \"" + test_plugin_dir() + "\"]\n";
  std::string text = daemon.base_config();
  text.replace(text.find("[plugins]"), text.find("[logging]") - text.find("[plugins]"),
               with_test_plugins + "\n");
  daemon.write_config(text + "[exploration]\nmax_candidates = \"lots\"\n");
  const CommandResult refused =
      run_command({placementctl_bin(), "--socket", daemon.socket, "reload"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_FALSE(offers_placer(daemon, "slow")) << "a plugin of the refused config is offered";
  // Accepted, the same directories bring it.
  daemon.write_config(text);
  const CommandResult accepted =
      run_command({placementctl_bin(), "--socket", daemon.socket, "reload"});
  EXPECT_EQ(accepted.exit_code, 0) << accepted.err << daemon.log();
  EXPECT_TRUE(offers_placer(daemon, "slow"));
}

TEST(Reload, BrokenPluginLibrariesAreSkippedWithOneLineEach) {
  const fs::path extra = fs::temp_directory_path() / ("plugins." + std::to_string(::getpid()));
  fs::create_directories(extra);
  std::ofstream(extra / "truncated.so") << "\x7f"
                                           "ELF truncated";
  fs::copy_file(test_plugin_dir() + "/wrong_abi.so", extra / "wrong_abi.so");
  fs::copy_file(fs::path(plugin_dir()) / "placers" / "single_device.so",
                extra / "single_device_dup.so");
  DaemonProcess daemon({"", "", {plugin_dir(), extra.string()}});
  daemon.start();
  const std::string log = daemon.log();
  EXPECT_NE(log.find("skipping plugin " + (extra / "truncated.so").string() + ": cannot load"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("skipping plugin " + (extra / "wrong_abi.so").string() + ": plugin ABI tag"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("skipping plugin " + (extra / "single_device_dup.so").string() +
                     ": duplicate placer name"),
            std::string::npos)
      << log;
  const json plugins =
      daemon.client().request(MessageType::kListPlugins, json::object(), MessageType::kPluginList);
  EXPECT_EQ(plugins["plugins"].size(), built_plugin_count());
  EXPECT_EQ(plugins["skipped"].size(), 3u);

  // A plugin added later is picked up by a reload; the skipped ones are reported again.
  fs::copy_file(test_plugin_dir() + "/throwing_info.so", extra / "throwing_info.so");
  daemon.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(daemon, "info exploded")) << daemon.log();
  EXPECT_TRUE(daemon.alive());
  EXPECT_EQ(
      daemon.client()
          .request(MessageType::kListPlugins, json::object(), MessageType::kPluginList)["skipped"]
          .size(),
      4u);
  fs::remove_all(extra);
}

}  // namespace
}  // namespace placement::testing
