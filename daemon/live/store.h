#pragma once
// Persistent state under the state directory, per user (uid): the best placement each user's jobs
// measured for each (graph fingerprint, device set), which the next run of the same model tries
// first, and each learned policy's state, so it resumes learning. One uid's state is never what
// another uid's jobs start from; an admin shares it by copying the file into the other uid's
// directory (docs/operations.md).

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json_fwd.hpp>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"

namespace placementd {

struct StoredPlacement {
  placement::Placement placement;
  double step_time_s = 0.0;
  std::string job;
};

/// The contents of a stored placement file (JSON, one line).
std::string stored_placement_file(const placement::OpGraph& graph,
                                  const placement::DeviceSet& devices,
                                  const StoredPlacement& stored);
/// A stored placement file's contents for this graph and device set; throws placement::FormatError
/// naming what does not fit. What a file holds is checked like a client's message: anyone who could
/// write the state directory may have written it.
StoredPlacement stored_placement_from_json(const nlohmann::json& doc,
                                           const placement::OpGraph& graph,
                                           const placement::DeviceSet& devices);

/// The store answers from memory what it read or was given, and writes on a thread of its own, so
/// no caller waits for a disk (a session offers its best after every candidate, under its lock).
/// Files are written atomically (temp + fsync + rename), the latest content per file only when
/// writes pile up; a failed write is logged, counted, and tried again with the next offer. A
/// damaged file is reported and ignored, never fatal. Thread-safe. The destructor finishes the
/// queued writes.
class Store {
 public:
  /// Stored placements the store keeps in memory, counted in ops (a placement of a graph of n ops
  /// costs n; one found absent, 1): beyond it the least recently used that are on disk are
  /// dropped and read again when asked for. Every uid's graphs, as many as jobs upload over the
  /// daemon's life, would otherwise stay (a 200 000-op placement is 800 KB).
  static constexpr size_t kMaxCachedOps = size_t{4} << 20;

  /// Creates `state_dir`/placements and /policies if needed (each user's files go in a directory
  /// of their uid below them); throws std::runtime_error naming the directory.
  explicit Store(std::string state_dir, size_t max_cached_ops = kMaxCachedOps);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& dir() const { return dir_; }

  /// `owner`'s stored placement for this graph and device set, if any and if it still fits them.
  std::optional<StoredPlacement> best(uid_t owner, const placement::OpGraph& graph,
                                      const placement::DeviceSet& devices) const;

  /// Takes `candidate` if it beats what is stored (or nothing is) and queues its file. Returns
  /// true if taken.
  bool offer(uid_t owner, const placement::OpGraph& graph, const placement::DeviceSet& devices,
             const StoredPlacement& candidate);

  /// A learned policy's parameters and optimiser state (TrainablePolicy::save_state) for this
  /// graph, device set and `key` (grouper+placer+algorithm), so the next run resumes learning.
  /// Queued.
  void save_policy_state(uid_t owner, const placement::OpGraph& graph,
                         const placement::DeviceSet& devices, const std::string& key,
                         std::string state);
  std::optional<std::string> policy_state(uid_t owner, const placement::OpGraph& graph,
                                          const placement::DeviceSet& devices,
                                          const std::string& key) const;

  /// Blocks until every write queued before the call is done. Never call it on the I/O thread.
  void flush();
  /// The same for at most `timeout`: false if the writes were not done by then (a disk that
  /// hangs), and they go on in the background.
  bool flush_within(std::chrono::milliseconds timeout);
  /// Whether the stored best for this graph and device set is on disk as the store holds it: no
  /// write of it is pending and the last one succeeded (a failed one is in the daemon log).
  bool on_disk(uid_t owner, const placement::OpGraph& graph,
               const placement::DeviceSet& devices) const;
  /// Calls `done` on the store's thread once every write queued before the call is done.
  void after_writes(std::function<void()> done);
  /// Writes that failed since the store was opened.
  uint64_t failed_writes() const;

  /// What one uid's files (placements and policy states) may take on disk: before a write would
  /// pass it, that uid's least recently written files are removed (never one waiting to be
  /// written); a file larger than the whole of it is not written (a failed write, logged). Counted
  /// from the disk at the uid's first write after start, then by the writer. Any thread.
  void set_max_bytes_per_uid(uint64_t bytes);
  /// Bytes of `owner`'s files as the writer counts them (0 before its first write), and the files
  /// removed to keep uids within their bound since the store was opened.
  uint64_t bytes_of(uid_t owner) const;
  uint64_t removed_files() const;
  /// What the stored placements held in memory count, in ops (see kMaxCachedOps).
  size_t cached_ops() const;

 private:
  /// Removes the temporaries of writes that a killed daemon left behind.
  void remove_unfinished_writes() const;
  /// Says what files of the layout before per-user state lie unused.
  void report_unowned_files() const;
  std::string path_for(uid_t owner, const placement::OpGraph& graph,
                       const placement::DeviceSet& devices) const;
  std::string policy_path(uid_t owner, const placement::OpGraph& graph,
                          const placement::DeviceSet& devices, const std::string& key) const;
  /// The stored placement of `path`, read from disk the first time (caller holds mutex_).
  std::optional<StoredPlacement>& known_locked(const std::string& path,
                                               const placement::OpGraph& graph,
                                               const placement::DeviceSet& devices) const;
  /// Reads a stored placement from disk (caller holds mutex_).
  std::optional<StoredPlacement> read_best(const std::string& path, const placement::OpGraph& graph,
                                           const placement::DeviceSet& devices) const;
  /// Hands `contents` to the writer (caller holds mutex_).
  void queue_locked(const std::string& path, std::string contents);
  void write(const std::string& path);
  /// Makes room for `bytes` at `path` within its uid's bound, removing that uid's least recently
  /// written files; returns why it cannot ("" when it can). On the writer's thread.
  std::string make_room(const std::string& path, uint64_t bytes);

  std::string dir_;
  mutable std::mutex mutex_;
  /// Stored placements by file, as read once or as last offered (nullopt: none stored).
  struct Known {
    std::optional<StoredPlacement> best;
    /// No file was there at the last look (a damaged one is not read again until replaced).
    bool absent = false;
    /// When it was last asked for (use_clock_), for dropping the least recently used.
    uint64_t used = 0;
    size_t ops() const {
      return best ? std::max<size_t>(best->placement.device_of_op.size(), 1) : 1;
    }
  };
  mutable std::map<std::string, Known> best_;
  size_t max_cached_ops_;
  mutable size_t cached_ops_ = 0;
  mutable uint64_t use_clock_ = 0;
  /// Drops the least recently used entries that are on disk as held (not `keep`) until the cache
  /// is within max_cached_ops_ (caller holds mutex_).
  void shrink_locked(const std::string& keep) const;
  /// Files waiting for the writer, with their latest contents.
  std::map<std::string, std::string> pending_;
  /// The file the writer is writing now ("" between writes).
  std::string writing_;
  uint64_t failed_ = 0;
  /// Files whose last write failed, with the error.
  std::map<std::string, std::string> errors_;
  /// Each uid's files on disk by the name of its directory (its uid), as the writer counts them:
  /// every file's size and when it was last written. Guarded by mutex_.
  struct UidFiles {
    struct File {
      uint64_t bytes = 0;
      std::filesystem::file_time_type written;
    };
    std::map<std::string, File> files;
    uint64_t bytes = 0;
  };
  std::map<std::string, UidFiles> uid_files_;
  std::atomic<uint64_t> max_bytes_per_uid_{std::numeric_limits<uint64_t>::max()};
  uint64_t removed_ = 0;
  /// Declared last: destroyed (joined, after its queued writes) first.
  boost::asio::thread_pool writer_{1};
};

}  // namespace placementd
