#include "daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace placement::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string make_temp_dir() {
  char tmpl[] = "/tmp/pdt.XXXXXX";  // short: Unix socket paths are limited to 108 bytes
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  ::chmod(tmpl, 0755);  // tests run clients under another uid too
  return tmpl;
}

namespace {

pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path, const std::vector<std::string>& extra_env = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                   O_WRONLY | O_CREAT | (out_path == err_path ? O_APPEND : O_TRUNC),
                                   0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  for (const auto& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Waits for `pid` to exit, killing it once `give_up()` says so (asked every `poll_ms`); returns
// its exit code.
int wait_exit_unless(pid_t pid, const std::function<bool()>& give_up, int poll_ms) {
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (give_up()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  return exit_code(status);
}

// Waits up to `timeout_ms` for `pid` to exit, then kills it; returns its exit code.
int wait_exit(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  return wait_exit_unless(
      pid, [&] { return std::chrono::steady_clock::now() > deadline; }, 5);
}

}  // namespace

std::map<int, int> threads_by_nice(pid_t pid) {
  std::map<int, int> count;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(tasks)) {
    const std::string stat = read_file(entry.path().string() + "/stat");
    // The command name may hold spaces: fields count on from its closing parenthesis (field 2).
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) ++count[std::stoi(field)];
  }
  return count;
}

std::string placementd_bin() { return PLACEMENTD_BIN; }
std::string placementctl_bin() { return PLACEMENTCTL_BIN; }
std::string plugin_dir() { return PLUGIN_DIR; }
std::string test_plugin_dir() { return TEST_PLUGIN_DIR; }
std::string hold_job_bin() { return HOLD_JOB_BIN; }
std::string hold_partial_frames_bin() { return HOLD_PARTIAL_FRAMES_BIN; }
std::string example_graph() { return EXAMPLE_GRAPH; }

size_t built_plugin_count() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(plugin_dir()))
    n += entry.path().extension() == ".so" ? 1 : 0;
  return n;
}

bool learned_plugins_built() {
  return static_cast<bool>(std::ifstream(plugin_dir() + "/placers/feedforward.so"));
}

bool under_address_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

bool under_thread_sanitizer() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

CommandResult run_command(const std::vector<std::string>& argv) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/out", err = dir + "/err";
  const pid_t pid = spawn(argv, out, err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  CommandResult result{exit_code(status), read_file(out), read_file(err)};
  std::filesystem::remove_all(dir);
  return result;
}

DaemonOptions fast_exploration(int64_t max_candidates, double max_overhead_fraction) {
  DaemonOptions o;
  o.log_level = "info";
  o.extra =
      "[policy]\ngrouper = \"none\"\n[exploration]\nsteps_per_candidate = 3\nwarmup_steps = "
      "1\nmax_candidates = " +
      std::to_string(max_candidates) +
      "\nconverge_candidates = 0\ntrial_window_steps = 1\nmax_trial_steps = "
      "32\nmax_overhead_fraction = " +
      std::to_string(max_overhead_fraction) + "\n";
  return o;
}

DaemonProcess::DaemonProcess(DaemonOptions options) : options_(std::move(options)) {
  if (options_.plugin_dirs.empty()) options_.plugin_dirs = {plugin_dir()};
  dir = make_temp_dir();
  socket = dir + "/pd.sock";
  config_path = dir + "/placementd.toml";
  state_dir = dir + "/state";
  log_path = dir + "/placementd.log";
  write_config(base_config());
}

namespace {

// The default policy's placer (feedforward) needs LibTorch. A build without it
// (scripts/sanitize.sh) has test daemons place with a baseline placer instead, unless the test
// names a placer: tests of everything but the learned plugins run there too, and those of the
// learned ones skip.
std::string with_a_built_placer(std::string extra) {
  if (learned_plugins_built()) return extra;
  const std::string header = "[policy]\n";
  const size_t table = extra.rfind(header, 0) == 0 ? 0 : extra.find("\n" + header);
  if (table == std::string::npos) return extra + "\n[policy]\nplacer = \"list_scheduling\"\n";
  const size_t body = table + (table == 0 ? header.size() : header.size() + 1);
  const size_t next = extra.find("\n[", body);
  if (extra.substr(body, next == std::string::npos ? std::string::npos : next - body)
          .find("placer =") != std::string::npos)
    return extra;
  return extra.insert(body, "placer = \"list_scheduling\"\n");
}

}  // namespace

std::string DaemonProcess::base_config() const {
  std::string dirs;
  for (const auto& d : options_.plugin_dirs) dirs += (dirs.empty() ? "\"" : ", \"") + d + "\"";
  return "[daemon]\nsocket = \"" + socket + "\"\nstate_dir = \"" + state_dir +
         "\"\nsocket_mode = " + options_.socket_mode + "\n" +
         (options_.frame_timeout_ms > 0
              ? "frame_timeout_ms = " + std::to_string(options_.frame_timeout_ms) + "\n"
              : "") +
         options_.daemon_keys + "\n[plugins]\ndirs = [" + dirs + "]\n\n[logging]\nlevel = \"" +
         options_.log_level + "\"\n" + with_a_built_placer(options_.extra);
}

void DaemonProcess::write_config(const std::string& text) const {
  std::ofstream(config_path) << text;
}

DaemonProcess::~DaemonProcess() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void DaemonProcess::start() {
  std::vector<std::string> argv = options_.launcher;
  for (const std::string& a : {placementd_bin(), std::string("--config"), config_path})
    argv.push_back(a);
  pid = spawn(argv, log_path, log_path, options_.env);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      throw std::runtime_error("placementd exited with " + std::to_string(exit_code(status)) +
                               ":\n" + log());
    }
    try {
      client(1000);
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  throw std::runtime_error("placementd did not answer within 10 s:\n" + log());
}

int DaemonProcess::stop(int signo) {
  if (pid <= 0) return -1;
  ::kill(pid, signo);
  const int code = wait_exit(pid, 10000);
  pid = -1;
  return code;
}

bool DaemonProcess::alive() {
  if (pid <= 0) return false;
  int status;
  if (::waitpid(pid, &status, WNOHANG) == pid) {
    pid = -1;
    return false;
  }
  return true;
}

void DaemonProcess::signal(int signo) { ::kill(pid, signo); }

std::string DaemonProcess::log() const { return read_file(log_path); }

placement::Client DaemonProcess::client(int timeout_ms) const {
  return placement::Client({socket, "test", timeout_ms});
}

}  // namespace placement::testing

namespace placement::testing {

Child::Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env)
    : dir_(make_temp_dir()) {
  pid = spawn(argv, dir_ + "/out", dir_ + "/err", extra_env);
}

Child::~Child() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool Child::wait_for_output(const std::string& text, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (out().find(text) != std::string::npos) return true;
    int status;
    if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return out().find(text) != std::string::npos;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void Child::signal(int signo) {
  if (pid > 0) ::kill(pid, signo);
}

int Child::wait(int timeout_ms) {
  if (pid <= 0) return -1;
  const int code = wait_exit(pid, timeout_ms);
  pid = -1;
  return code;
}

int Child::wait_while_writing(int stall_ms) {
  if (pid <= 0) return -1;
  const auto written = [&] {
    std::error_code ec;
    return std::filesystem::file_size(dir_ + "/out", ec) +
           std::filesystem::file_size(dir_ + "/err", ec);
  };
  uintmax_t size = written();
  auto grew = std::chrono::steady_clock::now();
  const int code = wait_exit_unless(
      pid,
      [&] {
        const auto now = std::chrono::steady_clock::now();
        if (const uintmax_t now_size = written(); now_size != size) {
          size = now_size;
          grew = now;
        }
        return now - grew > std::chrono::milliseconds(stall_ms);
      },
      50);
  pid = -1;
  return code;
}

std::string Child::out() const { return read_file(dir_ + "/out"); }
std::string Child::err() const { return read_file(dir_ + "/err"); }

}  // namespace placement::testing
