#pragma once
// The papers' graphs and topologies the simulation benchmarks run on (tests/data, DATA_DIR), by
// name, and the command-line check that a name has its file.

#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#ifndef DATA_DIR
#error "papers_data.h needs DATA_DIR: the source tree's tests/data"
#endif

namespace placement::bench {

/// The shipped capture of `model` at the papers' settings.
inline std::string graph_file(const std::string& model) {
  return std::string(DATA_DIR "/graphs/papers/") + model + ".json.gz";
}
inline std::string topology_file(const std::string& name) {
  return std::string(DATA_DIR "/topologies/") + name + ".toml";
}

/// Accepts NAME when its file exists: a misspelt name fails at once, not after the models listed
/// before it have run for minutes.
inline CLI::Validator shipped(std::string (*file_of)(const std::string&)) {
  return CLI::Validator(
      [file_of](std::string& name) -> std::string {
        const std::string file = file_of(name);
        return std::ifstream(file) ? "" : "no file " + file;
      },
      "");
}

}  // namespace placement::bench
