#include "live/store.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placementd {

namespace fs = std::filesystem;
using nlohmann::json;

Store::Store(std::string state_dir, size_t max_cached_ops)
    : dir_(std::move(state_dir)), max_cached_ops_(max_cached_ops) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "placements", ec);
  if (!ec) fs::create_directories(fs::path(dir_) / "policies", ec);
  if (ec) throw std::runtime_error("state directory " + dir_ + ": " + ec.message());
  remove_unfinished_writes();
  report_unowned_files();
}

// Before state was kept per user, every uid's jobs shared placements/ and policies/: a file there
// may be anybody's, so no job starts from it.
void Store::report_unowned_files() const {
  size_t unowned = 0;
  for (const char* sub : {"placements", "policies"}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(dir_) / sub, ec))
      if (entry.is_regular_file(ec) &&
          entry.path().filename().string().find(".tmp.") == std::string::npos)
        ++unowned;
  }
  if (unowned)
    spdlog::warn(
        "{} stored placement or policy file(s) in {}/placements and {}/policies predate per-user "
        "state "
        "and are not used: whose they are is unknown. To give one to a user, move it into the "
        "directory "
        "named by their uid beside it",
        unowned, dir_, dir_);
}

// A write goes to "<file>.tmp.<pid>.<random>" (write_file_atomically; or an older daemon's
// "<file>.tmp.<pid>") and is renamed over the file once complete; a daemon killed
// in between leaves the temporary behind. Those of processes that are gone are removed; a live
// one's (another daemon sharing the directory) may still be renamed.
void Store::remove_unfinished_writes() const {
  size_t removed = 0;
  for (const char* sub : {"placements", "policies"}) {
    std::error_code ec;
    // A directory the daemon may not read (an admin's copy with the wrong owner) is skipped, never
    // the end of the start.
    for (auto it = fs::recursive_directory_iterator(
             fs::path(dir_) / sub, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::directory_entry& entry = *it;
      const std::string name = entry.path().filename().string();
      const size_t tmp = name.rfind(".tmp.");
      if (tmp == std::string::npos) continue;
      const std::string pid = name.substr(tmp + 5, name.find('.', tmp + 5) - (tmp + 5));
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
        continue;
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
      std::error_code removing;
      if (fs::remove(entry.path(), removing))
        ++removed;
      else
        spdlog::warn("cannot remove the unfinished write {}: {}", entry.path().string(),
                     removing.message());
    }
  }
  if (removed)
    spdlog::info("removed {} unfinished write(s) of a daemon that was stopped mid-write", removed);
}

Store::~Store() { writer_.join(); }

std::string Store::path_for(uid_t owner, const placement::OpGraph& graph,
                            const placement::DeviceSet& devices) const {
  return (fs::path(dir_) / "placements" / std::to_string(owner) /
          (graph.fingerprint() + "-" + devices.fingerprint() + ".json"))
      .string();
}

StoredPlacement stored_placement_from_json(const json& doc, const placement::OpGraph& graph,
                                           const placement::DeviceSet& devices) {
  if (!doc.is_object() || !doc.contains("placement"))
    throw placement::FormatError(
        "not a stored placement: an object with placement and step_time_s");
  if (!doc.contains("step_time_s") || !doc["step_time_s"].is_number())
    throw placement::FormatError("step_time_s: expected a number");
  StoredPlacement stored;
  stored.placement = placement::placement_from_json(doc["placement"], graph, devices);
  stored.step_time_s = doc["step_time_s"].get<double>();
  // A time that could never be beaten (0, negative, NaN, infinite) would keep the file forever.
  if (!std::isfinite(stored.step_time_s) || stored.step_time_s <= 0.0)
    throw placement::FormatError("step_time_s must be a finite time > 0, not " +
                                 doc["step_time_s"].dump());
  if (doc.contains("job")) {
    if (!doc["job"].is_string()) throw placement::FormatError("job: expected a string");
    stored.job = doc["job"].get<std::string>();
  }
  return stored;
}

std::optional<StoredPlacement> Store::read_best(const std::string& path,
                                                const placement::OpGraph& graph,
                                                const placement::DeviceSet& devices) const {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return stored_placement_from_json(placement::read_json_file(path), graph, devices);
  } catch (const std::exception& e) {
    spdlog::warn("ignoring stored placement {}: {}", path, e.what());
    return std::nullopt;
  }
}

std::optional<StoredPlacement>& Store::known_locked(const std::string& path,
                                                    const placement::OpGraph& graph,
                                                    const placement::DeviceSet& devices) const {
  std::error_code ec;
  auto known = best_.find(path);
  if (known == best_.end()) {
    known =
        best_.emplace(path, Known{read_best(path, graph, devices), !fs::exists(path, ec)}).first;
    cached_ops_ += known->second.ops();
  } else if (!pending_.count(path) && writing_ != path && !errors_.count(path)) {
    // An admin deletes a stored file to forget that placement, or copies one in to share it, also
    // while the daemon runs: the disk decides (a write still queued, or failed, is not on it).
    const bool there = fs::exists(path, ec) && !ec;
    const size_t before = known->second.ops();
    if (known->second.best && !there && !ec) {
      known->second = Known{std::nullopt, true};
    } else if (known->second.absent && there) {
      known->second = Known{read_best(path, graph, devices), false};
    }
    cached_ops_ = cached_ops_ - before + known->second.ops();
  }
  known->second.used = ++use_clock_;
  shrink_locked(path);
  return known->second.best;
}

void Store::shrink_locked(const std::string& keep) const {
  if (cached_ops_ <= max_cached_ops_) return;
  // Oldest first; an entry whose write is queued, running or failed is the only copy: it stays.
  std::vector<std::pair<uint64_t, std::string>> by_use;
  for (const auto& [path, k] : best_)
    if (path != keep && !pending_.count(path) && writing_ != path && !errors_.count(path))
      by_use.emplace_back(k.used, path);
  std::sort(by_use.begin(), by_use.end());
  for (const auto& [used, path] : by_use) {
    if (cached_ops_ <= max_cached_ops_) break;
    const auto it = best_.find(path);
    cached_ops_ -= it->second.ops();
    best_.erase(it);
  }
}

size_t Store::cached_ops() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_ops_;
}

std::optional<StoredPlacement> Store::best(uid_t owner, const placement::OpGraph& graph,
                                           const placement::DeviceSet& devices) const {
  const std::string path = path_for(owner, graph, devices);
  std::lock_guard<std::mutex> lock(mutex_);
  return known_locked(path, graph, devices);
}

std::string stored_placement_file(const placement::OpGraph& graph,
                                  const placement::DeviceSet& devices,
                                  const StoredPlacement& stored) {
  const json doc = {{"graph_fingerprint", graph.fingerprint()},
                    {"devices_fingerprint", devices.fingerprint()},
                    {"graph_name", graph.name},
                    {"job", stored.job},
                    {"step_time_s", stored.step_time_s},
                    {"placement", placement::to_json(stored.placement, devices)}};
  return doc.dump() + "\n";
}

bool Store::offer(uid_t owner, const placement::OpGraph& graph, const placement::DeviceSet& devices,
                  const StoredPlacement& candidate) {
  const std::string path = path_for(owner, graph, devices);
  // Compared, remembered and queued under one lock: two jobs of one model offering at once leave
  // the faster on disk.
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<StoredPlacement>& known = known_locked(path, graph, devices);
  if (known && known->step_time_s <= candidate.step_time_s) {
    // The best is known but its last write failed (a full disk, say): every offer tries it again,
    // so it reaches the disk once there is room, not only when a faster placement comes along.
    if (errors_.count(path) && !pending_.count(path) && writing_ != path)
      queue_locked(path, stored_placement_file(graph, devices, *known));
    return false;
  }
  const size_t before = best_.at(path).ops();
  known = candidate;
  cached_ops_ = cached_ops_ - before + best_.at(path).ops();
  queue_locked(path, stored_placement_file(graph, devices, candidate));
  return true;
}

std::string Store::policy_path(uid_t owner, const placement::OpGraph& graph,
                               const placement::DeviceSet& devices, const std::string& key) const {
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '+')
      throw std::invalid_argument("policy key '" + key + "' has characters unfit for a file name");
  return (fs::path(dir_) / "policies" / std::to_string(owner) /
          (graph.fingerprint() + "-" + devices.fingerprint() + "-" + key + ".bin"))
      .string();
}

void Store::save_policy_state(uid_t owner, const placement::OpGraph& graph,
                              const placement::DeviceSet& devices, const std::string& key,
                              std::string state) {
  const std::string path = policy_path(owner, graph, devices, key);
  std::lock_guard<std::mutex> lock(mutex_);
  queue_locked(path, std::move(state));
}

std::optional<std::string> Store::policy_state(uid_t owner, const placement::OpGraph& graph,
                                               const placement::DeviceSet& devices,
                                               const std::string& key) const {
  const std::string path = policy_path(owner, graph, devices, key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto queued = pending_.find(path); queued != pending_.end()) return queued->second;
  }
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

void Store::queue_locked(const std::string& path, std::string contents) {
  // A file already waiting gets the newer contents: one write, of the latest.
  const bool waiting = pending_.count(path) > 0;
  pending_[path] = std::move(contents);
  if (!waiting) boost::asio::post(writer_, [this, path] { write(path); });
}

namespace {

// The uid a state file belongs to: the name of its directory (placements/UID/...,
// policies/UID/...).
std::string uid_of(const std::string& path) {
  return fs::path(path).parent_path().filename().string();
}

}  // namespace

void Store::set_max_bytes_per_uid(uint64_t bytes) { max_bytes_per_uid_ = bytes; }

uint64_t Store::bytes_of(uid_t owner) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = uid_files_.find(std::to_string(owner));
  return it == uid_files_.end() ? 0 : it->second.bytes;
}

uint64_t Store::removed_files() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return removed_;
}

std::string Store::make_room(const std::string& path, uint64_t bytes) {
  const std::string uid = uid_of(path);
  const uint64_t limit = max_bytes_per_uid_.load();
  bool counted = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counted = uid_files_.count(uid) > 0;
  }
  if (!counted) {
    // The uid's first write since the start: what its directories hold is counted from the disk
    // (without the lock: sessions never wait for a disk).
    UidFiles found;
    for (const char* sub : {"placements", "policies"}) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(fs::path(dir_) / sub / uid, ec)) {
        std::error_code stat;
        if (!entry.is_regular_file(stat) ||
            entry.path().filename().string().find(".tmp.") != std::string::npos)
          continue;
        const uint64_t size = entry.file_size(stat);
        const fs::file_time_type written = entry.last_write_time(stat);
        if (stat) continue;
        found.files[entry.path().string()] = {size, written};
        found.bytes += size;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    uid_files_.emplace(uid, std::move(found));
  }
  std::vector<std::string> removing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    UidFiles& files = uid_files_.at(uid);
    if (bytes > limit)
      return path + " takes " + std::to_string(bytes) + " bytes, more than uid " + uid +
             " may keep (daemon.max_state_bytes_per_uid = " + std::to_string(limit) + ")";
    const auto it = files.files.find(path);
    const uint64_t replaced = it == files.files.end() ? 0 : it->second.bytes;
    // Oldest first; a file waiting for its write is about to be new again.
    std::vector<std::pair<fs::file_time_type, std::string>> by_age;
    for (const auto& [other, file] : files.files)
      if (other != path && !pending_.count(other)) by_age.emplace_back(file.written, other);
    std::sort(by_age.begin(), by_age.end());
    for (const auto& [written, other] : by_age) {
      if (files.bytes - replaced + bytes <= limit) break;
      files.bytes -= files.files.at(other).bytes;
      files.files.erase(other);
      // A stored placement held in memory is read from the disk again: it is gone there.
      if (const auto known = best_.find(other); known != best_.end()) {
        cached_ops_ -= known->second.ops();
        best_.erase(known);
      }
      errors_.erase(other);
      removing.push_back(other);
      ++removed_;
    }
    if (files.bytes - replaced + bytes > limit)
      return "no room for " + path + " within uid " + uid + "'s " + std::to_string(limit) +
             " bytes (daemon.max_state_bytes_per_uid): the rest of its files wait for writes";
  }
  for (const std::string& other : removing) {
    std::error_code ec;
    fs::remove(other, ec);
    if (ec)
      spdlog::error("cannot remove {} to keep uid {} within daemon.max_state_bytes_per_uid: {}",
                    other, uid, ec.message());
    else
      spdlog::warn(
          "removed {}, uid {}'s least recently written state file, to keep its files within "
          "daemon.max_state_bytes_per_uid ({} bytes)",
          other, uid, limit);
  }
  return "";
}

void Store::write(const std::string& path) {
  std::string contents;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto queued = pending_.find(path);
    if (queued == pending_.end()) return;
    contents = std::move(queued->second);
    pending_.erase(queued);
    writing_ = path;
  }
  std::string error = make_room(path, contents.size());
  if (error.empty()) {
    try {
      // A user's directory, made at their first write: readable by the daemon alone.
      const fs::path directory = fs::path(path).parent_path();
      if (!fs::exists(directory)) {
        fs::create_directories(directory);
        fs::permissions(directory, fs::perms::owner_all);
      }
      placement::write_file_atomically(path, contents);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!error.empty()) spdlog::error("state not persisted: {}", error);
  std::lock_guard<std::mutex> lock(mutex_);
  writing_.clear();
  if (error.empty()) {
    errors_.erase(path);
    UidFiles& files = uid_files_.at(uid_of(path));
    UidFiles::File& file = files.files[path];
    files.bytes = files.bytes - file.bytes + contents.size();
    file = {contents.size(), fs::file_time_type::clock::now()};
  } else {
    ++failed_;
    errors_[path] = error;
  }
}

void Store::after_writes(std::function<void()> done) {
  boost::asio::post(writer_, std::move(done));
}

bool Store::flush_within(std::chrono::milliseconds timeout) {
  // Shared with the writer, which may still run it after this call has given up.
  auto written = std::make_shared<std::promise<void>>();
  std::future<void> done = written->get_future();
  after_writes([written] { written->set_value(); });
  return done.wait_for(timeout) == std::future_status::ready;
}

void Store::flush() {
  std::promise<void> written;
  after_writes([&written] { written.set_value(); });
  written.get_future().wait();
}

bool Store::on_disk(uid_t owner, const placement::OpGraph& graph,
                    const placement::DeviceSet& devices) const {
  const std::string path = path_for(owner, graph, devices);
  std::lock_guard<std::mutex> lock(mutex_);
  return !pending_.count(path) && writing_ != path && !errors_.count(path);
}

uint64_t Store::failed_writes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

}  // namespace placementd
