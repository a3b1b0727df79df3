#include "bench_daemon.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench_util.h"

namespace placement::bench {

namespace {

std::string log_of(const std::string& dir) {
  std::ifstream in(dir + "/placementd.log");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string example_graph_path() { return EXAMPLE_GRAPH; }

BenchDaemon::BenchDaemon(const std::string& extra_config) {
  dir = make_temp_dir("pdb");  // short: the socket goes inside
  socket = dir + "/pd.sock";
  const std::string config = dir + "/placementd.toml";
  std::ofstream(config) << "[daemon]\nsocket = \"" << socket << "\"\nstate_dir = \"" << dir
                        << "/state\"\n\n[plugins]\ndirs = [\"" << PLUGIN_DIR
                        << "\"]\n\n[logging]\nlevel = \"warn\"\n"
                        << extra_config;
  pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // A benchmark that crashes (no destructor runs) takes its daemon with it.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    const std::string log = dir + "/placementd.log";
    if (!std::freopen(log.c_str(), "w", stderr) || !std::freopen(log.c_str(), "a", stdout))
      ::_exit(127);
    ::execl(PLACEMENTD_BIN, PLACEMENTD_BIN, "--config", config.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      throw std::runtime_error("placementd exited before answering:\n" + log_of(dir));
    }
    try {
      client(1000);
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  throw std::runtime_error("placementd did not answer within 10 s:\n" + log_of(dir));
}

BenchDaemon::~BenchDaemon() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

placement::Client BenchDaemon::client(int timeout_ms) const {
  return placement::Client({socket, "bench", timeout_ms});
}

int BenchDaemon::stop() {
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  pid = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace placement::bench
