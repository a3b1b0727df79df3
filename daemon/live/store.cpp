#include "live/store.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "placement/serialization.h"

namespace placementd {

namespace fs = std::filesystem;
using nlohmann::json;

Store::Store(std::string state_dir) : dir_(std::move(state_dir)) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "placements", ec);
  if (!ec) fs::create_directories(fs::path(dir_) / "policies", ec);
  if (ec) throw std::runtime_error("state directory " + dir_ + ": " + ec.message());
}

std::string Store::path_for(const placement::OpGraph& graph, const placement::DeviceSet& devices) const {
  return (fs::path(dir_) / "placements" / (graph.fingerprint() + "-" + devices.fingerprint() + ".json")).string();
}

std::optional<StoredPlacement> Store::best(const placement::OpGraph& graph,
                                           const placement::DeviceSet& devices) const {
  const std::string path = path_for(graph, devices);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    const json doc = placement::read_json_file(path);
    StoredPlacement stored;
    stored.placement = placement::placement_from_json(doc.at("placement"), graph, devices);
    stored.step_time_s = doc.at("step_time_s").get<double>();
    stored.job = doc.value("job", "");
    return stored;
  } catch (const std::exception& e) {
    spdlog::warn("ignoring stored placement {}: {}", path, e.what());
    return std::nullopt;
  }
}

bool Store::offer(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                  const StoredPlacement& candidate) {
  if (auto current = best(graph, devices); current && current->step_time_s <= candidate.step_time_s) return false;
  const json doc = {{"graph_fingerprint", graph.fingerprint()},
                    {"devices_fingerprint", devices.fingerprint()},
                    {"graph_name", graph.name},
                    {"job", candidate.job},
                    {"step_time_s", candidate.step_time_s},
                    {"placement", placement::to_json(candidate.placement, devices)}};
  placement::write_json_file(path_for(graph, devices), doc, -1);
  return true;
}

std::string Store::policy_path(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                               const std::string& key) const {
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '+')
      throw std::invalid_argument("policy key '" + key + "' has characters unfit for a file name");
  return (fs::path(dir_) / "policies" / (graph.fingerprint() + "-" + devices.fingerprint() + "-" + key + ".bin")).string();
}

void Store::save_policy_state(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                              const std::string& key, const std::string& state) {
  placement::write_file_atomically(policy_path(graph, devices, key), state);
}

std::optional<std::string> Store::policy_state(const placement::OpGraph& graph, const placement::DeviceSet& devices,
                                               const std::string& key) const {
  const std::string path = policy_path(graph, devices, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    spdlog::warn("ignoring stored policy state {}: read error", path);
    return std::nullopt;
  }
  return contents.str();
}

}  // namespace placementd
