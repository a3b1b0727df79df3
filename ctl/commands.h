#pragma once
// placementctl's subcommands. Each returns the process exit code and prints either aligned
// tables or, with --json, one JSON document on stdout.

#include <cstdint>
#include <string>

namespace placementctl {

struct Globals {
  std::string socket;
  bool json = false;
  int timeout_ms = 5000;
};

int status(const Globals& g);
int jobs(const Globals& g, bool all);
int job_show(const Globals& g, uint64_t id);
int plugins(const Globals& g);
int reload(const Globals& g);
/// Works offline: no daemon needed.
int config_check(const Globals& g, const std::string& file);
/// Offline: predicted step time and memory of a placement (or, without one, of every
/// single-device placement), and the lower bound.
int simulate(const Globals& g, const std::string& graph, const std::string& topology, const std::string& placement);

}  // namespace placementctl
