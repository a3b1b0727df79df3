#pragma once
// A real placementd process on a private temporary socket, for integration tests.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "placement/client.h"

namespace placement::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// The whole file ("" if it cannot be read).
std::string read_file(const std::string& path);

/// Runs argv to completion, capturing stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv);

/// How many threads of process `pid` have each nice value (/proc/PID/task/TID/stat).
std::map<int, int> threads_by_nice(pid_t pid);

/// Binaries and directories of this build (from compile definitions).
std::string placementd_bin();
std::string placementctl_bin();
std::string plugin_dir();
std::string test_plugin_dir();
std::string hold_job_bin();
std::string hold_partial_frames_bin();
std::string example_graph();
/// How many plugin libraries this build produced (what a daemon on plugin_dir() should load).
size_t built_plugin_count();
/// Whether this build has the LibTorch plugins, the default policy's placer (feedforward) among
/// them; a build without LibTorch (scripts/sanitize.sh) does not, and its tests of them skip.
bool learned_plugins_built();
/// Whether this program runs under AddressSanitizer, whose quarantine keeps freed memory resident:
/// resident-memory bounds say nothing there.
bool under_address_sanitizer();
/// Whether this program runs under ThreadSanitizer, which handles fatal signals itself and whose
/// allocator, too, keeps freed memory resident.
bool under_thread_sanitizer();

struct DaemonOptions {
  /// Lines added to [daemon].
  std::string daemon_keys;
  /// Whole sections appended to the config.
  std::string extra;
  std::vector<std::string> plugin_dirs;  // default: this build's plugins
  /// Tests read debug lines from the log; benchmarks turn it down.
  std::string log_level = "debug";
  /// Prepended to the daemon's command line (e.g. systemd-socket-activate -l SOCKET).
  std::vector<std::string> launcher;
  /// Extra environment entries, "NAME=value".
  std::vector<std::string> env;
  /// [daemon] frame_timeout_ms: short, so tests of slow senders finish quickly; 0 leaves the
  /// daemon's default, as a benchmark that loads two cores with 64 senders needs (a sender
  /// descheduled mid-frame for half a second is no slow sender there).
  int64_t frame_timeout_ms = 500;
  /// [daemon] socket_mode: open to every uid, so tests can run clients as other users; the
  /// isolation test sets the shipped unit's.
  std::string socket_mode = "0o666";
};

/// Short candidates and short A/B trials (windows of 1 step, at most 32 pairs), so a test sees many
/// swaps and candidates in few steps; one group per op, so the policy has many placements to
/// propose. Without expected_steps the overhead budget paces exploration by the job's time; 1.0
/// turns that off for tests that want many swaps in few steps.
DaemonOptions fast_exploration(int64_t max_candidates = 12, double max_overhead_fraction = 1.0);

class DaemonProcess {
 public:
  explicit DaemonProcess(DaemonOptions options = {});
  ~DaemonProcess();

  /// Starts the daemon and waits until it answers a status request; throws with its log if it
  /// exits or does not answer within 10 s.
  void start();
  /// Sends `signal` and waits for the exit; returns the exit code (128+n if killed by signal n).
  int stop(int signal = 15);
  bool alive();
  void signal(int signo);

  std::string log() const;
  placement::Client client(int timeout_ms = 5000) const;
  /// Replaces the config file (for reload tests).
  void write_config(const std::string& text) const;
  std::string base_config() const;
  /// Adds "NAME=value" to the environment of the next start().
  void add_env(std::string entry) { options_.env.push_back(std::move(entry)); }

  std::string dir, socket, config_path, state_dir, log_path;
  pid_t pid = -1;

 private:
  DaemonOptions options_;
};

}  // namespace placement::testing

namespace placement::testing {

/// A new directory under /tmp with a name short enough for a Unix socket inside it.
std::string make_temp_dir();

/// Any child process with its output in files; for job processes in integration tests.
class Child {
 public:
  /// `extra_env`: NAME=VALUE entries added to this process's environment.
  explicit Child(const std::vector<std::string>& argv,
                 const std::vector<std::string>& extra_env = {});
  ~Child();
  /// Waits until stdout contains `text`; false on timeout or exit.
  bool wait_for_output(const std::string& text, int timeout_ms = 10000);
  void signal(int signo);
  /// Waits for the exit; returns the exit code (128+n for signal n).
  int wait(int timeout_ms = 10000);
  /// Waits for the exit as long as the process writes on: it is killed (and 137 returned) only
  /// once its stdout and stderr have not grown for `stall_ms`. For jobs that log as they train,
  /// whose length in seconds depends on the machine, where a fixed deadline fails a slow one.
  int wait_while_writing(int stall_ms);
  std::string out() const;
  std::string err() const;
  pid_t pid = -1;

 private:
  std::string dir_;
};

}  // namespace placement::testing
