#pragma once
// A job's line to placementd, run by a background thread so the training loop never waits on it:
// it attaches (and re-attaches after the daemon restarts), uploads the graph, sends step reports
// and receives placement directives. Torch-free; placement::Job (job.h) drives it.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/inspection.h"
#include "placement/messages.h"
#include "placement/placement.h"

namespace placement {

class Client;

struct JobChannelOptions {
  /// Empty: default_socket_path() ($PLACEMENTD_SOCKET, else the system default).
  std::string socket_path;
  /// What the job says of itself when it attaches (its name, devices, versions, the steps it
  /// expects and profiles, its replica group): sent whole on every attach and re-attach, each
  /// field the daemon's protocol version lacks left out. A new attach field is set where the job
  /// knows it (Job's constructor) and read where the daemon uses it; nothing between copies it.
  messages::Attach attach;
  OpGraph graph;
  /// The placement the job starts on (sent with the graph; the daemon measures it first).
  Placement start;
  /// Pause between attempts to reach the daemon while it is away.
  int reconnect_interval_ms = 1000;
  /// Pause after the daemon refused the graph for its [limits] (error over_limit), or a follower
  /// found a daemon too old for it: trying again every second would only repeat the refusal, until
  /// an admin raises the limits or upgrades placementd.
  int refused_retry_interval_ms = 300000;
  /// Limit for one round trip (attach, detach); the graph upload gets ten times as long.
  int timeout_ms = 5000;
};

/// A placement the daemon asked for, and which attachment it came on (a re-attach starts a new
/// one); reports under it carry the generation back, so none reaches a session that is gone.
struct ReceivedDirective {
  messages::Directive directive;
  uint64_t generation = 0;
};

class JobChannel {
 public:
  /// Starts the background thread; never throws because the daemon is missing (it keeps trying).
  explicit JobChannel(JobChannelOptions options);
  /// Detaches (bounded by timeout_ms) and stops the thread.
  ~JobChannel();
  JobChannel(const JobChannel&) = delete;
  JobChannel& operator=(const JobChannel&) = delete;

  /// The newest directive not taken yet (it supersedes older ones), or nullopt. Never blocks.
  std::optional<ReceivedDirective> take_directive();
  /// Queues a step report of the placement `generation`/`report.placement_id`. Never blocks;
  /// reports of an earlier attachment are dropped (that session is gone). A follower's reports
  /// name rank 0's placements and go to whichever attachment is current.
  void report(uint64_t generation, const messages::StepReport& report);
  /// Queues per-op profiles measured under placement `generation`/`report.placement_id`. Never
  /// blocks. They also go up with the graph on every later attach (a restarted daemon has them).
  void send_profiles(uint64_t generation, messages::ProfileReport report);
  /// Waits up to `timeout_ms` for the first directive (e.g. to start on the stored best placement);
  /// returns at once, false, when the first attempt to reach the daemon failed.
  bool wait_for_directive(int timeout_ms);

  /// The pinned host memory placementd allows the job's process (messages::Attached), as it said
  /// when the job last attached; 0 before that or from a daemon that says none. Lock-free: a step
  /// reads it.
  uint64_t host_pinned_bytes() const { return host_pinned_bytes_.load(std::memory_order_relaxed); }

  struct Status {
    bool connected = false;
    uint64_t session = 0;
    /// Successful attaches (more than one: the daemon went away and came back).
    uint64_t attaches = 0;
    /// Attempts to attach, successful or not.
    uint64_t attempts = 0;
    uint64_t reports_sent = 0;
    uint64_t reports_dropped = 0;
    uint64_t profiles_sent = 0;
    std::string last_error;
    /// What the daemon said the job should know when it last attached (messages::Attached).
    std::vector<std::string> notices;
    /// The daemon's answer to the detach (none when it did not answer).
    std::optional<messages::Detached> detached;
  };
  Status status() const;
  /// placementd's view of this job (what `placementctl jobs show` prints), asked on a connection
  /// of its own: works after close() too, while the daemon keeps the finished job. Throws when the
  /// job never attached or placementd cannot be reached.
  messages::JobInfo show() const;
  /// Sends the last reports, detaches and stops the thread (the destructor does it too). Returns
  /// the final status, `detached` filled when the daemon answered.
  Status close();

 private:
  void run();
  /// False when it failed; `*refused` says whether the daemon refused the graph for its limits.
  bool connect(bool* refused);
  /// A new attachment (`attached`: its session and notices) is up; mutex_ held.
  void attached_locked(const messages::Attached& attached);
  void pump(int wait_ms);
  void wake();

  JobChannelOptions options_;
  std::unique_ptr<Client> client_;  // background thread only
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, messages::StepReport>> reports_;
  std::deque<std::pair<uint64_t, messages::ProfileReport>> profiles_;
  std::optional<ReceivedDirective> directive_;
  Status status_;
  uint64_t generation_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> host_pinned_bytes_{0};
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace placement
