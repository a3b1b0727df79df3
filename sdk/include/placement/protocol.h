#pragma once
// The wire protocol between jobs/placementctl and placementd. Both sides use this file only.
//
// A frame is a 16-byte header followed by `length` bytes of CBOR (nlohmann::json::to_cbor):
//   bytes 0-3  magic "PLMT"       bytes 4-5  protocol version (little-endian)
//   bytes 6-7  message type        bytes 8-11 payload length   bytes 12-15 request id
// The first frame on a connection is Hello; the server answers Welcome with the version both use
// (or an error frame and a close). Replies carry the request id of their request. Step reports are
// one-way: the server never answers them unless they are malformed. docs/protocol.md lists the
// payload of every message.

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace placement::protocol {

inline constexpr std::array<uint8_t, 4> kMagic = {'P', 'L', 'M', 'T'};
inline constexpr uint16_t kMinVersion = 1;
// Version 2 added per-op profiles measured by the job: profile_report, `profiled` in step_report,
// `profile_steps` in attach and `profile` in placement_directive. Version 3 added each op's `work`
// (the cost model's FLOP and byte counts) to graph_upload's graph. Version 4 added data-parallel
// replicas: `replica` in attach and in a job's summary, and the job state "following". Version 5
// added residence (where tensors live, apart from where ops run): `parameters` in graph_upload's
// graph and `residence` in its placements and in placement_directive's.
inline constexpr uint16_t kMaxVersion = 5;
/// The first version with profile_report.
inline constexpr uint16_t kProfileReportVersion = 2;
/// The first version whose graph_upload carries op work.
inline constexpr uint16_t kOpWorkVersion = 3;
/// The first version that knows replica groups (a follower attaches only to a daemon that has it).
inline constexpr uint16_t kReplicaVersion = 4;
/// The first version whose graphs list their parameters and whose placements may say where
/// tensors live.
inline constexpr uint16_t kResidenceVersion = 5;
inline constexpr size_t kHeaderSize = 16;
/// Default for the config key daemon.max_frame_bytes.
inline constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;

enum class MessageType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kError = 3,
  // Job session.
  kAttach = 10,
  kAttached = 11,
  kGraphUpload = 12,
  kGraphAccepted = 13,
  kPlacementRequest = 14,
  kPlacementDirective = 15,
  kStepReport = 16,  // one-way
  kDetach = 17,
  kDetached = 18,
  kProfileReport = 19,  // one-way, version 2
  // Administration and inspection.
  kStatus = 30,
  kStatusReply = 31,
  kListJobs = 32,
  kJobList = 33,
  kListPlugins = 34,
  kPluginList = 35,
  kJobShow = 36,
  kJobInfo = 37,
  kReload = 38,
  kReloaded = 39,
};

/// "hello", "step_report", ...; "unknown(<n>)" for numbers this version does not know.
std::string to_string(MessageType type);
bool is_known_type(uint16_t type);
/// Whether clients send this type (hello, attach, status ...); the others are the daemon's answers.
bool is_request(MessageType type);
/// Every type this version knows, in protocol order.
std::vector<MessageType> known_types();

/// Error codes carried in error frames (messages::Error).
namespace error {
inline constexpr const char* kBadFrame = "bad_frame";             // bad magic: stream unusable
inline constexpr const char* kFrameTooLarge = "frame_too_large";  // length over the maximum
inline constexpr const char* kUnsupportedVersion = "unsupported_version";
inline constexpr const char* kUnknownType = "unknown_type";
inline constexpr const char* kBadPayload = "bad_payload";         // not CBOR, or wrong fields
inline constexpr const char* kUnexpected = "unexpected_message";  // valid, but not now
inline constexpr const char* kPermissionDenied = "permission_denied";
inline constexpr const char* kNotFound = "not_found";
inline constexpr const char* kInvalidConfig = "invalid_config";
inline constexpr const char* kTimeout = "timeout";
inline constexpr const char* kBusy = "busy";             // connection or input-buffer limit reached
inline constexpr const char* kOverLimit = "over_limit";  // a graph over a [limits] value
inline constexpr const char* kInternal = "internal";
}  // namespace error

struct Header {
  uint16_t version = kMaxVersion;
  uint16_t type = 0;
  uint32_t length = 0;
  uint32_t request_id = 0;
};

/// Little-endian encoding of the header, magic included.
std::array<uint8_t, kHeaderSize> encode_header(const Header& header);
/// Decodes a header; returns false if the magic is wrong (the stream cannot be trusted).
bool decode_header(const uint8_t* bytes, Header* header);

/// A complete frame: header + CBOR payload.
std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id, const nlohmann::json& body,
                                  uint16_t version = kMaxVersion);
/// Deepest nesting of arrays/maps a payload may have. Real payloads need about 6; the limit exists
/// because the CBOR parser recurses, so an unbounded depth would let a client overflow the stack.
inline constexpr size_t kMaxPayloadDepth = 32;

/// What decoding a payload would build, read from its CBOR heads alone: one pass that allocates
/// nothing per item, so a payload can be weighed against what its message needs before any of it
/// is decoded.
struct PayloadWeight {
  /// Deepest nesting of arrays and maps (the pass stops once it is past kMaxPayloadDepth).
  size_t depth = 0;
  /// Values and map keys.
  uint64_t items = 0;
  /// A bound on the heap decode_payload, and then freeing the document, hold at their peak for
  /// this payload, the allocator's block headers included: its containers with their growth,
  /// strings with their read buffers. It also bounds a payload the decoder gives up on part way,
  /// which it weighs as far as the decoder reads. In an array, an empty map weighs 160 bytes per
  /// byte of CBOR, a null 96 (payload_weight_fuzzer checks the bound).
  uint64_t decoded_bytes = 0;
  /// False when weighing stopped at `stop_above`: the payload weighs more than decoded_bytes.
  bool whole = true;
};
/// Weighs a payload, stopping once its weight is past `stop_above` (a refusal needs no more).
PayloadWeight weigh_payload(const uint8_t* bytes, size_t size,
                            uint64_t stop_above = std::numeric_limits<uint64_t>::max());

/// Decodes a CBOR payload; throws placement::FormatError ("payload is not valid CBOR: ...", or
/// "payload nests deeper than 32 levels").
nlohmann::json decode_payload(const uint8_t* bytes, size_t size);
/// The same, for a payload already weighed (its depth is checked from `weight`). `only_keys`: a map
/// payload's top-level entries under other keys are passed over as they are read, nothing of them
/// built (what a message's decoder would ignore anyway: messages::keys_read); the values of those
/// kept are decoded whole. nullptr: every entry.
nlohmann::json decode_payload(const uint8_t* bytes, size_t size, const PayloadWeight& weight,
                              const std::vector<std::string>* only_keys = nullptr);

}  // namespace placement::protocol
