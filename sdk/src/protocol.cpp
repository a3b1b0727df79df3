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
};

constexpr TypeName kTypeNames[] = {
    {MessageType::kHello, "hello"},
    {MessageType::kWelcome, "welcome"},
    {MessageType::kError, "error"},
    {MessageType::kAttach, "attach"},
    {MessageType::kAttached, "attached"},
    {MessageType::kGraphUpload, "graph_upload"},
    {MessageType::kGraphAccepted, "graph_accepted"},
    {MessageType::kPlacementRequest, "placement_request"},
    {MessageType::kPlacementDirective, "placement_directive"},
    {MessageType::kStepReport, "step_report"},
    {MessageType::kDetach, "detach"},
    {MessageType::kDetached, "detached"},
    {MessageType::kProfileReport, "profile_report"},
    {MessageType::kStatus, "status"},
    {MessageType::kStatusReply, "status_reply"},
    {MessageType::kListJobs, "list_jobs"},
    {MessageType::kJobList, "job_list"},
    {MessageType::kListPlugins, "list_plugins"},
    {MessageType::kPluginList, "plugin_list"},
    {MessageType::kJobShow, "job_show"},
    {MessageType::kJobInfo, "job_info"},
    {MessageType::kReload, "reload"},
    {MessageType::kReloaded, "reloaded"},
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
    const bool container = major == 4 || major == 5 || major == 6 || ((major == 2 || major == 3) && indefinite);
    if (!container) {
      item_done();
      continue;
    }
    if (!indefinite && major != 6 && value == 0) {  // empty array or map
      item_done();
      continue;
    }
    const int64_t items = indefinite ? -1 : major == 6 ? 1 : major == 5 ? static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX / 2)) * 2 : static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX));
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
