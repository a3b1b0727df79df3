#pragma once
// placementd's configuration: the TOML schema (etc/placementd.toml documents every key), its
// defaults, and a loader that reports every problem as "FILE:LINE:COL: message".

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/devices.h"
#include "placement/params.h"
#include "placement/plugin.h"
#include "placement/protocol.h"
#include "planning/group_cap.h"
#include "toml/source_pos.h"

namespace placementd {

/// Defaults of the [daemon] limits, for the config and the server alike (max_frame_bytes's is the
/// protocol's, placement::protocol::kDefaultMaxFrameBytes, which clients share).
inline constexpr int64_t kDefaultMaxConnections = 1024;
inline constexpr int64_t kDefaultMaxConnectionsPerUid = 64;
inline constexpr int64_t kDefaultMaxBufferedBytes = int64_t{512} << 20;
inline constexpr int64_t kDefaultFrameTimeoutMs = 10000;
inline constexpr int64_t kDefaultIdleTimeoutMs = 60000;
inline constexpr int64_t kDefaultMaxStateBytesPerUid = int64_t{1} << 30;
inline constexpr int64_t kDefaultMaxPendingBytesPerUid = int64_t{256} << 20;
/// Replies queued for a client that does not read them; past this its connection is closed. Not a
/// config key: a reply is at most as large as the largest frame a client may send, and a client
/// that leaves one of those unread is not reading.
inline constexpr size_t kMaxQueuedReplyBytes = placement::protocol::kDefaultMaxFrameBytes;

/// Hyperparameters for one plugin, with where each came from.
struct PluginParamTable {
  placement::Params values;
  std::map<std::string, SourcePos> where;
  SourcePos table;
};

/// Key: kind and name, e.g. {kAlgorithm, "reinforce"}.
using PluginParamKey = std::pair<placement::PluginKind, std::string>;
using PluginParamTables = std::map<PluginParamKey, PluginParamTable>;

struct ExplorationConfig {
  /// Real steps each candidate placement runs for.
  int64_t steps_per_candidate = 15;
  /// Steps after a swap that are discarded before the median is taken.
  int64_t warmup_steps = 5;
  /// Candidates tried before the best placement is kept for good.
  int64_t max_candidates = 100;
  /// Largest fraction of the job's time exploration may cost: what its steps take beyond the
  /// placement in force's (live/exploration.cpp), against the steps the job says it will run, or
  /// its time so far (the pace).
  double max_overhead_fraction = 0.05;
  /// Reward of an invalid or failing placement.
  double failing_reward = -10.0;
  /// Re-explore when the step time exceeds the best's by this fraction ...
  double drift_threshold = 0.10;
  /// ... for this many consecutive steps.
  int64_t drift_steps = 50;
  /// Exploration ends early after this many candidates in a row that no trial showed faster (0:
  /// never).
  int64_t converge_candidates = 30;
  /// A/B trials (live/trial.h): measured steps per window, the most measured steps one trial may
  /// take (both arms), the one-sided confidence a "faster" verdict needs, and the smallest gain
  /// worth a trial.
  int64_t trial_window_steps = 10;
  int64_t max_trial_steps = 4000;
  double confidence = 0.99;
  double min_gain = 0.02;
  /// Refinement (live/exploration.cpp): when exploration ends, the contenders (the candidates
  /// likeliest to be faster by refine_min_gain, by what was measured) get one long trial each, for
  /// a gain as small as refine_min_gain, sharing refine_fraction of the steps the job said it will
  /// run; one still unclear at its end goes by its estimate's side. A trial sized for a 2% gain
  /// cannot tell 1% from noise; a long job can afford to, and a near-equal contender costs it next
  /// to nothing while it runs. 0 contenders: no refinement.
  int64_t refine_contenders = 4;
  double refine_fraction = 0.4;
  double refine_min_gain = 0.005;
};

/// The most window pairs a trial may take (max_trial_steps / (2 trial_window_steps)).
constexpr int64_t kMaxTrialPairs = 500;

/// [limits]: what one job's graph may cost the daemon, checked before the graph is built.
struct LimitsConfig {
  /// Ops in an uploaded graph.
  int64_t max_graph_ops = 200000;
  /// Bytes of a graph upload's frame (its decoding is the largest transient allocation).
  int64_t max_graph_bytes = int64_t{64} << 20;
  /// The estimate of one session's memory (live/session_memory.h) from its graph's size.
  int64_t max_session_bytes = int64_t{2} << 30;
};

/// The grouper/placer/algorithm triple and its exploration settings.
struct PolicyChoice {
  std::string grouper = "colocation";
  std::string placer = "feedforward";
  std::string algorithm = "reinforce";
  /// Baseline placer a fresh policy imitates before its first live candidate ("": none).
  std::string warm_start;
  /// Wall time the "simulator" warm start's search may take on the session's policy thread.
  double warm_start_seconds = 1.0;
  /// Times a "simulator" warm start's model is refitted to the job's measured steps and searched
  /// again (live/refit.cpp).
  int64_t refits = 4;
  /// Policy samples per candidate that a "simulator" warm start's planning model (refitted, once
  /// it is) ranks; the one it predicts fastest runs (live/candidates.cpp). 1: each runs as drawn.
  int64_t screened_samples = 8;
  /// The most groups a placer is given (planning/group_cap.h).
  int64_t max_groups = kDefaultMaxGroups;
  SourcePos grouper_pos, placer_pos, algorithm_pos, warm_start_pos, max_groups_pos;
};

/// What a [[rules]] entry sets of a section: its values, and which keys it set (the others come
/// from the section).
template <typename Section>
struct Overrides {
  Section values;
  std::set<std::string> keys;
  bool has(const std::string& key) const { return keys.count(key) > 0; }
};

/// A per-job override, matched on the job name (glob) and/or the job's uid; the first match wins.
struct JobRule {
  std::optional<std::string> job_glob;
  std::optional<uid_t> uid;
  /// The [policy] keys a rule may set (grouper, placer, algorithm), and [exploration]'s.
  Overrides<PolicyChoice> policy;
  Overrides<ExplorationConfig> exploration;
  PluginParamTables params;
  SourcePos where;

  bool matches(const std::string& job, uid_t job_uid) const;
};

struct Config {
  /// The file it was read from ("" for built-in defaults).
  std::string path;

  // [daemon]
  /// Empty: $XDG_RUNTIME_DIR/placementd.sock for a user, /run/placementd/placementd.sock for root.
  std::string socket;
  /// Mode of a socket the daemon creates itself (not one systemd hands over).
  uint32_t socket_mode = 0660;
  /// Members of this group (and root) may list all jobs and reload the config.
  std::string admin_group = "placement-admin";
  /// Empty: $XDG_STATE_HOME/placementd for a user, /var/lib/placementd for root.
  std::string state_dir;
  uint32_t max_frame_bytes = placement::protocol::kDefaultMaxFrameBytes;
  int64_t max_connections = kDefaultMaxConnections;
  /// Connections of one uid (root's aside): one user's idle sockets cannot take every other's.
  int64_t max_connections_per_uid = kDefaultMaxConnectionsPerUid;
  /// Partial frames buffered over all connections together; past this the largest holder is closed
  /// ("busy"), so many slow uploads cannot exhaust the daemon's memory. Replies queued and unread
  /// over all connections are held to the same amount (the connection with the most is closed).
  int64_t max_buffered_bytes = kDefaultMaxBufferedBytes;
  /// A frame begun must complete within this time, a new connection must say hello within it, and
  /// a client whose socket is full must read some of its replies within it, or it is closed.
  int64_t frame_timeout_ms = kDefaultFrameTimeoutMs;
  /// A connection past its hello with no job attached (a tool's, which asks and goes) that sends
  /// nothing, and waits for no answer, this long is closed: it held its uid's place for ever.
  int64_t idle_timeout_ms = kDefaultIdleTimeoutMs;
  /// A stop (SIGTERM) persists every job's state for at most this long, then exits: under the
  /// unit's TimeoutStopSec (30 s), after which systemd would SIGKILL it mid-write.
  int64_t stop_timeout_ms = 20000;
  /// What one uid's stored placements and policy states may take in the state directory: past it,
  /// that uid's least recently written files are removed to make room (a file larger than this is
  /// not written). One user uploading graph after graph cannot fill the disk the daemon shares.
  int64_t max_state_bytes_per_uid = kDefaultMaxStateBytesPerUid;
  /// What one uid's requests waiting for a session or a policy thread may hold decoded, over all
  /// its connections (each weighed before it is decoded): past it, that uid's connections are read
  /// no further until its requests are done. One request larger than this still goes, alone.
  int64_t max_pending_bytes_per_uid = kDefaultMaxPendingBytesPerUid;
  /// Threads computing groupings and placements, off the I/O thread.
  int64_t policy_threads = 3;
  /// How many of them one uid's requests may hold at once (server/fair_share.h); 0: all but one
  /// (at least one), so that another uid's request always finds a thread free.
  int64_t policy_threads_per_uid = 0;
  /// policy_threads_per_uid as it applies: 0 resolved, and at most policy_threads.
  int64_t policy_share_per_uid() const;
  /// Their nice value (server/policy_priority.h): 19, the lowest priority, so a CPU-bound job on
  /// the same cores barely notices them.
  int64_t policy_nice = 19;

  // [logging]
  std::string log_level = "info";

  // [metrics]
  /// Where the Prometheus text endpoint listens ("HOST:PORT" or a Unix socket path); empty: off.
  std::string metrics_listen;

  // [plugins]
  std::vector<std::string> plugin_dirs;

  // [devices]
  /// Device name globs jobs may be placed on ("cpu:*", "cuda:*").
  std::vector<std::string> allow = {"cpu:*", "cuda:*"};
  /// Fraction of each device's memory the memory model keeps free.
  double memory_headroom_fraction = 0.10;
  /// The cost model's figures for this node's CPU and GPUs, given to a job's devices that come
  /// without a spec: the simulator then times the ops the job has not profiled (the warm start of a
  /// job that does not profile). Unset: such ops cannot be timed.
  std::optional<placement::DeviceSpec> cpu_spec, cuda_spec;

  // [policy], [exploration], [grouper.X], [placer.X], [algorithm.X], [[rules]]
  PolicyChoice policy;
  ExplorationConfig exploration;
  PluginParamTables params;
  LimitsConfig limits;
  std::vector<JobRule> rules;

  // [memory]
  /// Page-locked host memory one job's process may hold for what it copies between the host and
  /// its GPUs (the SDK's pinned pool); 0: a quarter of this machine's physical memory.
  int64_t host_pinned_bytes = 0;
  /// host_pinned_bytes as it applies: 0 resolved.
  uint64_t host_pinned_budget() const;
};

/// Built-in defaults (what an empty file gives), with plugin_dirs set to `default_plugin_dir`.
Config default_config(const std::string& default_plugin_dir);

/// Parses and checks a config file: TOML syntax, unknown keys, wrong types, out-of-range values.
/// Throws ConfigInvalid with every error found. Plugin names and their hyperparameters are
/// checked separately, against the loaded plugins (check_plugins()).
Config load_config(const std::string& path, const std::string& default_plugin_dir);
/// The same from a string (tests); `name` stands in for the file name in messages.
Config parse_config(const std::string& text, const std::string& name,
                    const std::string& default_plugin_dir);

/// Like load_config(), but returns what could be read and appends the errors instead of throwing
/// (so a checker can go on to check plugins and report everything at once).
Config load_config_collecting(const std::string& path, const std::string& default_plugin_dir,
                              std::vector<ConfigError>& errors);

/// The policy in force for a job: the config's defaults with the first matching rule applied.
/// [policy] with the job's rule applied, its plugins' parameters and its [exploration].
struct EffectivePolicy : PolicyChoice {
  placement::Params grouper_params, placer_params, algorithm_params;
  ExplorationConfig exploration;
  /// Index of the rule that matched, or -1.
  int rule = -1;
};

/// Resolves rules for a job; plugin parameters are the raw ones (defaults are filled in when the
/// plugin is created).
EffectivePolicy effective_policy(const Config& config, const std::string& job, uid_t uid);

/// The state directory when neither --state-dir nor the config names one: $STATE_DIRECTORY
/// (systemd), /var/lib/placementd for root, else $XDG_STATE_HOME/placementd or
/// ~/.local/state/placementd. Throws std::runtime_error if none can be derived.
std::string default_state_dir();

}  // namespace placementd
