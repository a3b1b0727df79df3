#include "placement/protocol.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placement::protocol {

namespace {

struct TypeName {
  MessageType type;
  const char* name;
  bool request;  // sent by clients; the others are the daemon's answers
};

constexpr TypeName kTypeNames[] = {
    {MessageType::kHello, "hello", true},
    {MessageType::kWelcome, "welcome", false},
    {MessageType::kError, "error", false},
    {MessageType::kAttach, "attach", true},
    {MessageType::kAttached, "attached", false},
    {MessageType::kGraphUpload, "graph_upload", true},
    {MessageType::kGraphAccepted, "graph_accepted", false},
    {MessageType::kPlacementRequest, "placement_request", true},
    {MessageType::kPlacementDirective, "placement_directive", false},
    {MessageType::kStepReport, "step_report", true},
    {MessageType::kDetach, "detach", true},
    {MessageType::kDetached, "detached", false},
    {MessageType::kProfileReport, "profile_report", true},
    {MessageType::kStatus, "status", true},
    {MessageType::kStatusReply, "status_reply", false},
    {MessageType::kListJobs, "list_jobs", true},
    {MessageType::kJobList, "job_list", false},
    {MessageType::kListPlugins, "list_plugins", true},
    {MessageType::kPluginList, "plugin_list", false},
    {MessageType::kJobShow, "job_show", true},
    {MessageType::kJobInfo, "job_info", false},
    {MessageType::kReload, "reload", true},
    {MessageType::kReloaded, "reloaded", false},
};

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Nesting depth of a CBOR item sequence, found without recursion. Stops early (returning what it
// has seen) at the first malformed head: the real parser rejects the payload at that same point,
// and cannot have nested deeper than what was scanned before it.
size_t cbor_depth(const uint8_t* p, size_t size, size_t limit) {
  std::vector<int64_t> open;  // items still expected in each open container; -1 = indefinite
  size_t deepest = 0, pos = 0;
  auto item_done = [&open] {
    while (!open.empty() && open.back() > 0 && --open.back() == 0) open.pop_back();
  };
  while (pos < size) {
    const uint8_t head = p[pos++];
    const int major = head >> 5, info = head & 0x1f;
    uint64_t value = info;
    if (info >= 24 && info <= 27) {
      const size_t n = size_t{1} << (info - 24);
      if (pos + n > size) return deepest;
      value = 0;
      for (size_t i = 0; i < n; ++i) value = (value << 8) | p[pos + i];
      pos += n;
    } else if (info >= 28 && info <= 30) {
      return deepest;
    }
    const bool indefinite = info == 31;
    if (major == 7 && indefinite) {  // "break": closes the innermost indefinite container
      if (open.empty() || open.back() != -1) return deepest;
      open.pop_back();
      item_done();
      continue;
    }
    if ((major == 2 || major == 3) && !indefinite) {
      if (value > size - pos) return deepest;
      pos += value;
      item_done();
      continue;
    }
    const bool container =
        major == 4 || major == 5 || major == 6 || ((major == 2 || major == 3) && indefinite);
    if (!container) {
      item_done();
      continue;
    }
    if (!indefinite && major != 6 && value == 0) {  // empty array or map
      item_done();
      continue;
    }
    const int64_t items = indefinite   ? -1
                          : major == 6 ? 1
                          : major == 5
                              ? static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX / 2)) * 2
                              : static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX));
    open.push_back(items);
    deepest = std::max(deepest, open.size());
    if (deepest > limit) return deepest;
  }
  return deepest;
}

}  // namespace

std::string to_string(MessageType type) {
  for (const TypeName& t : kTypeNames)
    if (t.type == type) return t.name;
  return "unknown(" + std::to_string(static_cast<unsigned>(type)) + ")";
}

bool is_request(MessageType type) {
  for (const TypeName& t : kTypeNames)
    if (t.type == type) return t.request;
  return false;
}

std::vector<MessageType> known_types() {
  std::vector<MessageType> out;
  for (const TypeName& t : kTypeNames) out.push_back(t.type);
  return out;
}

bool is_known_type(uint16_t type) {
  for (const TypeName& t : kTypeNames)
    if (static_cast<uint16_t>(t.type) == type) return true;
  return false;
}

std::array<uint8_t, kHeaderSize> encode_header(const Header& header) {
  std::array<uint8_t, kHeaderSize> out{};
  for (size_t i = 0; i < kMagic.size(); ++i) out[i] = kMagic[i];
  put16(&out[4], header.version);
  put16(&out[6], header.type);
  put32(&out[8], header.length);
  put32(&out[12], header.request_id);
  return out;
}

bool decode_header(const uint8_t* bytes, Header* header) {
  for (size_t i = 0; i < kMagic.size(); ++i)
    if (bytes[i] != kMagic[i]) return false;
  header->version = get16(bytes + 4);
  header->type = get16(bytes + 6);
  header->length = get32(bytes + 8);
  header->request_id = get32(bytes + 12);
  return true;
}

std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id, const nlohmann::json& body,
                                  uint16_t version) {
  std::vector<uint8_t> payload = nlohmann::json::to_cbor(body);
  Header header{version, static_cast<uint16_t>(type), static_cast<uint32_t>(payload.size()),
                request_id};
  const auto head = encode_header(header);
  std::vector<uint8_t> frame;
  frame.reserve(kHeaderSize + payload.size());
  frame.insert(frame.end(), head.begin(), head.end());
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

nlohmann::json decode_payload(const uint8_t* bytes, size_t size) {
  if (cbor_depth(bytes, size, kMaxPayloadDepth) > kMaxPayloadDepth)
    throw FormatError("payload nests deeper than " + std::to_string(kMaxPayloadDepth) + " levels");
  try {
    return nlohmann::json::from_cbor(bytes, bytes + size);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("payload is not valid CBOR: ") + e.what());
  }
}

}  // namespace placement::protocol
