#pragma once
// One struct per protocol message, with its codec: what a job, placementctl and placementd say to
// each other (protocol.h frames them). Both sides and the examples build and read messages only
// through these types; docs/protocol.md lists the same fields.
//
// Each message names its frame type (kType) and the first protocol version that has it (kSince);
// a field added later says its version. Each codec is derived from one table of the message's
// fields (sdk/src/message_codec.h, the tables in messages.cpp and inspection.cpp): decoders check
// every field they read and throw FormatError naming it ("devices.devices[0].kind: ..."); keys they
// do not know are ignored, so a newer peer can add optional fields within a version; encoders
// given a peer's version leave out the fields it does not have.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "placement/devices.h"
#include "placement/graph.h"
#include "placement/placement.h"
#include "placement/protocol.h"

namespace placement::messages {

using protocol::MessageType;

/// Where a job's session is: attached → profiling (the start placement is measured) → exploring →
/// exploiting (→ re-exploring on drift → exploiting) → detached. A replica of rank > 0 is
/// following (protocol 4): rank 0's daemon places the group; this one only shows it.
enum class JobState {
  kAttached,
  kProfiling,
  kExploring,
  kExploiting,
  kReexploring,
  kDetached,
  kFollowing
};
/// "attached", "profiling", "exploring", "exploiting", "re-exploring", "detached", "following".
const char* to_string(JobState state);
/// Every state, in the order above (for listings that show each one, such as the metrics).
std::vector<JobState> all_job_states();

/// Why placementd asks a job to run a placement.
enum class Reason {
  kStart,   // the job's own start placement, measured first
  kCached,  // the best placement this uid stored for the graph and devices: the first candidate
  kSingleDevice,  // every op on one device (the first GPU), offered once after the start
  kWarmStart,     // the warm start's answer, a heuristic's placement or the answer with two
                  // devices swapped after it, or a refit's (docs/live.md)
  kPolicy,        // a sample of the learned policy
  kReexplore,     // a policy sample after a drift
  kRemeasure,     // the best again, after its step time drifted
  kBest,          // the best measured placement, kept from now on
};
/// "start", "cached", "single device", "warm start", "policy", "re-explore", "re-measure", "best".
const char* to_string(Reason reason);
/// Throws FormatError for a name to_string() never gives.
Reason reason_from_string(const std::string& name);

/// Protocol 4: one replica of a data-parallel job. Rank 0's daemon session decides the group's
/// placement; the daemons of the other ranks see them as followers.
struct ReplicaInfo {
  /// Longest group name the daemon takes.
  static constexpr size_t kMaxGroupName = 256;
  int64_t rank = 0;
  int64_t world_size = 1;
  /// The same on every rank of one run of the group, and only there ("10.0.0.1:29500/3fa2c1d0":
  /// the rendezvous address and a number rank 0 drew), so `placementctl jobs` on each node names
  /// it.
  std::string group;
  bool follower() const { return rank > 0; }
  nlohmann::json to_json() const;
};

// ---- Handshake ----

struct Hello {
  static constexpr MessageType kType = MessageType::kHello;
  static constexpr uint16_t kSince = 1;
  uint16_t min_version = protocol::kMinVersion;
  uint16_t max_version = protocol::kMaxVersion;
  /// Who is calling, for the daemon's log ("placement job NAME", "placementctl").
  std::string client;
  nlohmann::json to_json() const;
  static Hello from_json(const nlohmann::json& body);
};

struct Welcome {
  static constexpr MessageType kType = MessageType::kWelcome;
  static constexpr uint16_t kSince = 1;
  /// The version both sides use from now on.
  uint16_t version = 0;
  /// "placementd 0.1.0".
  std::string server;
  uint32_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  /// The uid the daemon sees (SO_PEERCRED), and whether it may administer.
  uint64_t uid = 0;
  bool admin = false;
  nlohmann::json to_json() const;
  static Welcome from_json(const nlohmann::json& body);
};

/// The body of an error frame; `code` is one of protocol::error.
struct Error {
  static constexpr MessageType kType = MessageType::kError;
  static constexpr uint16_t kSince = 1;
  std::string code = "unknown";
  std::string message;
  /// The daemon closes the connection after it.
  bool fatal = false;
  nlohmann::json to_json() const;
  static Error from_json(const nlohmann::json& body);
};

// ---- A job's session ----

struct Attached {
  static constexpr MessageType kType = MessageType::kAttached;
  static constexpr uint16_t kSince = 1;
  uint64_t session = 0;
  std::string grouper, placer, algorithm;
  int64_t steps_per_candidate = 0;
  int64_t warmup_steps = 0;
  int64_t max_candidates = 0;
  /// What the job should know about its session, in words (e.g. that its exploration cannot
  /// finish within the steps it expects). Older daemons send none.
  std::vector<std::string> notices;
  /// Page-locked host memory the job's process may hold ([memory] host_pinned_bytes, resolved).
  /// Older daemons send none.
  std::optional<uint64_t> host_pinned_bytes;
  nlohmann::json to_json() const;
  static Attached from_json(const nlohmann::json& body);
};

struct Attach {
  static constexpr MessageType kType = MessageType::kAttach;
  static constexpr uint16_t kSince = 1;
  using Reply = Attached;
  /// Longest job name the daemon takes.
  static constexpr size_t kMaxJobName = 256;
  /// Most steps a job may be asked to profile.
  static constexpr int64_t kMaxProfileSteps = 1000;
  std::string job;
  DeviceSet devices;
  std::string sdk_version;
  std::string torch_version;
  /// Steps the job intends to run (0: unknown); bounds exploration to a fraction of them.
  uint64_t expected_steps = 0;
  /// Protocol 2: steps the job profiles per op when a directive asks (0: it never does).
  std::optional<int64_t> profile_steps;
  /// Protocol 4: the job is one replica of a group. A follower (rank > 0) uploads no graph, asks
  /// for no placement and is sent none; its step reports only show what it does.
  std::optional<ReplicaInfo> replica;
  /// Fields newer than `version` (profile_steps, replica) are left out.
  nlohmann::json to_json(uint16_t version = protocol::kMaxVersion) const;
  /// Checks the name's length, profile_steps' range and the replica's rank and group besides the
  /// types.
  static Attach from_json(const nlohmann::json& body);
};

struct GraphAccepted {
  static constexpr MessageType kType = MessageType::kGraphAccepted;
  static constexpr uint16_t kSince = 1;
  std::string fingerprint;
  uint64_t ops = 0, edges = 0;
  int64_t groups = 0;
  /// A placement stored from an earlier run of this graph on these devices comes first.
  bool cached = false;
  /// The learned policy continues from its stored state.
  bool policy_resumed = false;
  nlohmann::json to_json() const;
  static GraphAccepted from_json(const nlohmann::json& body);
};

struct GraphUpload {
  static constexpr MessageType kType = MessageType::kGraphUpload;
  static constexpr uint16_t kSince = 1;
  using Reply = GraphAccepted;
  OpGraph graph;
  /// The placement the job starts on (default: all on its first device).
  std::optional<Placement> start;
  /// `devices`: the attached job's, which the start placement names. Below `version`
  /// kOpWorkVersion the ops' work is left out, below kResidenceVersion the graph's parameters
  /// and the start's residence (those daemons refuse keys they do not know).
  nlohmann::json to_json(const DeviceSet& devices, uint16_t version = protocol::kMaxVersion) const;
  static GraphUpload from_json(const nlohmann::json& body, const DeviceSet& devices);
};

/// A placement placementd asks the job to run: the reply to PlacementRequest, and pushed unasked
/// (request id 0) whenever the daemon decides the next one.
struct Directive {
  static constexpr MessageType kType = MessageType::kPlacementDirective;
  static constexpr uint16_t kSince = 1;
  /// Step reports under it carry this id back.
  uint64_t placement_id = 0;
  Reason reason = Reason::kStart;
  /// The session's state when it was sent.
  JobState state = JobState::kProfiling;
  /// Protocol 2: measure per-op costs under this placement and send a ProfileReport.
  bool profile = false;
  /// On a pushed directive: the `step` of the report that made the daemon send it, so a job (or a
  /// benchmark) can tell how long the decision took. Absent on a reply and from older daemons.
  std::optional<uint64_t> after_step;
  Placement placement;
  nlohmann::json to_json(const DeviceSet& devices) const;
  static Directive from_json(const nlohmann::json& body, const OpGraph& graph,
                             const DeviceSet& devices);
};

struct PlacementRequest {
  static constexpr MessageType kType = MessageType::kPlacementRequest;
  static constexpr uint16_t kSince = 1;
  using Reply = Directive;
  nlohmann::json to_json() const;
};

/// One step of a job under one placement, as the job reports it (one-way). Unknown keys are
/// ignored, like every message's: a newer SDK may say more without a new protocol version.
struct StepReport {
  static constexpr MessageType kType = MessageType::kStepReport;
  static constexpr uint16_t kSince = 1;
  /// Which directive the step ran under.
  uint64_t placement_id = 0;
  /// The job's own step counter.
  uint64_t step = 0;
  double step_time_s = 0.0;
  /// False when the step failed under that placement (and was retried on the last good one).
  bool ok = true;
  std::string error;
  /// What of `error` crosses the wire and is kept (the daemon logs it, keeps it per candidate and
  /// sends it back in `jobs show`): its first bytes, the rest counted.
  static constexpr size_t kMaxError = 4096;
  /// The step ran under the per-op profiler (see ProfileReport): it counts as a step of the
  /// placement, but its time includes the instrumentation, so it is no measurement of it.
  bool profiled = false;

  bool operator==(const StepReport& other) const;
  /// `profiled` is left out below protocol 2.
  nlohmann::json to_json(uint16_t version = protocol::kMaxVersion) const;
  /// Checks the time (finite, > 0 for a step that ran: it is placementd's reward), keeps the
  /// error's first kMaxError bytes and writes its control characters out (it reaches logs and
  /// terminals), so that one job's error is never more than a few KiB anywhere.
  static StepReport from_json(const nlohmann::json& body);
};

/// What a job's device held by kind under one placement, as the job measured it when its profiled
/// steps' backward ended (the optimizer's state as its last update left it): the bytes a memory
/// model is scored against, kind by kind. Not a message: a part of ProfileReport and CandidateInfo.
struct HeldBytes {
  /// Parameters and buffers living there (their home).
  uint64_t parameters = 0;
  uint64_t buffers = 0;
  /// Those parameters' gradients, and the optimizer's state of them.
  uint64_t gradients = 0;
  uint64_t optimizer_state = 0;
  /// Copies of parameters living elsewhere, kept there for the ops reading them (persistent
  /// proxies; a streamed one is empty by then).
  uint64_t copies = 0;
  /// The profiled ops' outputs kept for their backward there: an op's own device, an offload's
  /// target, nothing for a recompute (OpProfile::activation_bytes under the placement's residence).
  uint64_t activations = 0;

  bool operator==(const HeldBytes& other) const;
  nlohmann::json to_json() const;
  /// Each field optional (0), unknown keys ignored, as a message's.
  static HeldBytes from_json(const nlohmann::json& body);
};

/// Per-op costs a job measured on its own training steps under one of placementd's placements
/// (one-way, protocol 2), each for the kind of device the op ran on.
struct ProfileReport {
  static constexpr MessageType kType = MessageType::kProfileReport;
  static constexpr uint16_t kSince = 2;
  struct Entry {
    int op = 0;
    /// "cpu" or "cuda".
    std::string kind;
    OpProfile profile;
    bool operator==(const Entry& other) const;
  };
  uint64_t placement_id = 0;
  /// Steps each op's median is over.
  uint64_t steps = 0;
  std::vector<Entry> ops;
  /// Per device of the job (in its attach order), the most it held during the forward and
  /// backward of any of these steps, as the job measured it: a CUDA device's caching allocator
  /// peak, a logical CPU device's count where the job has a memory limit; 0 where it measured
  /// nothing. Empty: no device measured (older SDKs send none).
  std::vector<uint64_t> peak_bytes;
  /// Per device (attach order), what lived there by kind, the most of each over these steps.
  /// Empty: not measured (older SDKs send none).
  std::vector<HeldBytes> held_bytes;

  /// Stores every entry as graph.ops[op].profile[kind] (replacing what was there). Throws
  /// std::invalid_argument, naming the entry, for an op the graph lacks; `graph` is then unchanged.
  void apply(OpGraph& graph) const;
  bool operator==(const ProfileReport& other) const;
  /// {"placement_id", "steps", "ops": [{op, kind, forward_s, backward_s, update_s,
  /// activation_bytes}], "peak_bytes": [per device], "held_bytes": [per device: HeldBytes] (the
  /// last two only when measured)}
  nlohmann::json to_json() const;
  /// Checks shapes, kinds ("cpu", "cuda") and that times are >= 0; op ids against a graph are
  /// apply()'s to check.
  static ProfileReport from_json(const nlohmann::json& body);
};

struct Detached {
  static constexpr MessageType kType = MessageType::kDetached;
  static constexpr uint16_t kSince = 1;
  /// The best measured step time (none when nothing was measured).
  std::optional<double> best_step_time_s;
  /// The store holds that placement for the next run.
  bool persisted = false;
  nlohmann::json to_json() const;
  static Detached from_json(const nlohmann::json& body);
};

struct Detach {
  static constexpr MessageType kType = MessageType::kDetach;
  static constexpr uint16_t kSince = 1;
  using Reply = Detached;
  nlohmann::json to_json() const;
};

// ---- Administration and inspection ----

struct ListJobs {
  static constexpr MessageType kType = MessageType::kListJobs;
  static constexpr uint16_t kSince = 1;
  /// Every user's jobs (root or the admin group).
  bool all = false;
  /// The recently detached ones too.
  bool finished = false;
  nlohmann::json to_json() const;
  static ListJobs from_json(const nlohmann::json& body);
};

struct JobShow {
  static constexpr MessageType kType = MessageType::kJobShow;
  static constexpr uint16_t kSince = 1;
  uint64_t id = 0;
  nlohmann::json to_json() const;
  static JobShow from_json(const nlohmann::json& body);
};

struct Reloaded {
  static constexpr MessageType kType = MessageType::kReloaded;
  static constexpr uint16_t kSince = 1;
  /// The config file read, and the plugins usable after the reload.
  std::string config;
  uint64_t plugins = 0;
  nlohmann::json to_json() const;
  static Reloaded from_json(const nlohmann::json& body);
};

struct Reload {
  static constexpr MessageType kType = MessageType::kReload;
  static constexpr uint16_t kSince = 1;
  using Reply = Reloaded;
  nlohmann::json to_json() const;
};

/// The top-level keys the decoder of a request of `type` reads (its field table's, or what its
/// from_json reads), so that the daemon decodes no other (protocol::decode_payload's only_keys):
/// the rest it would ignore anyway. Empty for a request whose body nothing reads; nullopt for a
/// type that is not a request the daemon reads (decoded whole).
std::optional<std::vector<std::string>> keys_read(MessageType type);

}  // namespace placement::messages
