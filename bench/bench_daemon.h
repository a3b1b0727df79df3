#pragma once
// A placementd of this build on a private socket, for the benchmarks that measure through one
// (control_plane_bench, live_bench). Built with the benchmarks, tests or not.

#include <sys/types.h>

#include <string>

#include "placement/client.h"

namespace placement::bench {

class BenchDaemon {
 public:
  /// Starts placementd with this build's plugins, logging warnings only (so logging does not
  /// weigh on the figures), the daemon's default limits, and `extra_config` appended. Throws with
  /// the daemon's log if it exits or does not answer within 10 s.
  explicit BenchDaemon(const std::string& extra_config = "");
  /// Kills a daemon still running and removes its directory.
  ~BenchDaemon();
  BenchDaemon(const BenchDaemon&) = delete;
  BenchDaemon& operator=(const BenchDaemon&) = delete;

  placement::Client client(int timeout_ms = 5000) const;
  /// SIGTERM, then waits; returns the exit code (128+n when killed by signal n).
  int stop();

  std::string dir, socket;
  pid_t pid = -1;
};

/// The example graph the benchmarks attach with (examples/graphs/two_tower_mlp.json).
std::string example_graph_path();

}  // namespace placement::bench
